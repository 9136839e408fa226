package app_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestNaturalKeys shows the uniqueness of a business identity doing what no
// Idempotency-Key can: stopping two different requests (two keys, two tabs,
// two devices) that mean the same thing. Both are counted in the database,
// under concurrent load, on each dialect.
func TestNaturalKeys(t *testing.T) {
	const n = 20
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithProvider(provider.Config{DuplicateWebhookRate: -1}))

			t.Run("one active payment per order, whatever the keys", func(t *testing.T) {
				order := w.CreateOrder(t, "sk_test_acme")
				statuses := make([]int, n)
				codes := make([]string, n)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						<-start
						// A key of its own each: to the idempotency layer these
						// are n unrelated operations.
						a := w.Pay(t, order, fmt.Sprintf("pay-%s-%d", order, i), "pm_card_visa")
						statuses[i] = a.Status
						if a.Status == 409 {
							codes[i], _ = a.JSON(t)["code"].(string)
						}
					})
				}
				close(start)
				wg.Wait()

				count := map[int]int{}
				for i, s := range statuses {
					count[s]++
					if s == 409 {
						// payment_in_progress while the winner is in flight,
						// order_already_paid once it has succeeded.
						require.Contains(t, []string{"payment_in_progress", "order_already_paid"}, codes[i])
					}
				}
				// One succeeds; every other one is refused with 409. (Payments
				// lock the order before the payment in every phase, so
				// concurrent payments of one order cannot deadlock.)
				require.Equal(t, 1, count[201], "one payment succeeds: %v", count)
				require.Equal(t, n-1, count[409], "every other one is 409: %v", count)
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE order_id = ?", order),
					"payments_one_active_per_order let one payment in")
				require.Len(t, w.Provider.Server.Charges(), 1, "and the provider charged once")
			})

			t.Run("the webhook inbox applies an event id once", func(t *testing.T) {
				// A true event (the provider confirms it), so that it is
				// recorded at all: a forged one never is.
				order := w.CreateOrder(t, "sk_test_acme")
				paid := w.Pay(t, order, apptest.NewKey(), "pm_card_visa").JSON(t)
				body := []byte(fmt.Sprintf(`{"id":"evt_storm","type":"charge.succeeded","created":1,"data":{"object":{"id":%q,"object":"charge","status":"succeeded","amount":2500,"currency":"BRL","reference":%q,"idempotency_key":%q}}}`,
					paid["provider_charge_id"], paid["id"], paid["id"]))
				statuses := make([]int, n)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						<-start
						a, err := apptest.Do(apptest.Request{Method: "POST", URL: w.URL + "/v1/webhooks/provider", Body: string(body),
							Header: []string{"Provider-Signature", provider.Sign("whsec_test", time.Now(), body)}})
						if err != nil {
							return
						}
						statuses[i] = a.Status
					})
				}
				close(start)
				wg.Wait()
				for _, s := range statuses {
					require.Equal(t, 200, s, "every delivery is acknowledged, so the provider stops sending")
				}
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM webhook_events WHERE event_id = 'evt_storm'"))
			})
		})
	}
}
