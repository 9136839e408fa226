package app_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestKeyReusedAfterItsTTLIsANewOperation: ids and provider keys are derived
// from the client's operation (merchant, key, purpose, generation), so that
// a retry after a failover lost the rows reaches the provider as the same
// call. A key legitimately reused once its record has expired (tombstones
// off, the contract's default) must still be a new operation: for another
// order, and for an equal second refund of the same payment, it gets a new
// id and a new provider key, is executed, and never gets the earlier
// call's outcome. Counted in our tables and in the provider's ledger.
func TestKeyReusedAfterItsTTLIsANewOperation(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithProvider(provider.Config{DuplicateWebhookRate: -1}),
				apptest.Env("IDEMPOTENCY_TTL=1s", "JANITOR_INTERVAL=100ms"))
			expired := func(method, url, key, body string) apptest.Answer {
				t.Helper()
				var a apptest.Answer
				testkit.Eventually(t, 15*time.Second, "the key's record expires", func() bool {
					a = apptest.Call(t, method, url, "sk_test_acme", key, body)
					return a.Header.Get("Idempotent-Replayed") == "" && a.Status != 422
				})
				return a
			}

			// One payment key, two orders: the second order is paid, not
			// answered with the first order's payment.
			payKey := apptest.NewKey()
			first, second := w.CreateOrder(t, "sk_test_acme"), w.CreateOrder(t, "sk_test_acme")
			a := w.Pay(t, first, payKey, "pm_card_visa")
			require.Equal(t, 201, a.Status, string(a.Body))
			firstPayment := a.JSON(t)["id"].(string)
			b := expired("POST", w.URL+"/v1/orders/"+second+"/payments", payKey, `{"payment_method":"pm_card_visa"}`)
			require.Equal(t, 201, b.Status, string(b.Body))
			secondPayment := b.JSON(t)["id"].(string)
			require.NotEqual(t, firstPayment, secondPayment, "a new generation, a new id")
			require.Equal(t, second, b.JSON(t)["order_id"])
			require.Len(t, w.Charges(t, firstPayment), 1)
			require.Len(t, w.Charges(t, secondPayment), 1, "the second order is charged")
			require.NotEqual(t, w.Text(t, "SELECT provider_key FROM payments WHERE id = ?", firstPayment),
				w.Text(t, "SELECT provider_key FROM payments WHERE id = ?", secondPayment), "a new provider key")
			for _, order := range []string{first, second} {
				o := apptest.Call(t, "GET", w.URL+"/v1/orders/"+order, "sk_test_acme", "", "").JSON(t)
				require.Equal(t, "paid", o["status"], order)
			}

			// One refund key, the same body twice on the same payment: two
			// refunds of 100, each made once at the provider.
			refundKey := apptest.NewKey()
			refunds := w.URL + "/v1/payments/" + firstPayment + "/refunds"
			r1 := apptest.Call(t, "POST", refunds, "sk_test_acme", refundKey, `{"amount":100}`)
			require.Equal(t, 201, r1.Status, string(r1.Body))
			r2 := expired("POST", refunds, refundKey, `{"amount":100}`)
			require.Equal(t, 201, r2.Status, string(r2.Body))
			require.NotEqual(t, r1.JSON(t)["id"], r2.JSON(t)["id"], "a new generation, a new refund")
			p := apptest.Call(t, "GET", w.URL+"/v1/payments/"+firstPayment, "sk_test_acme", "", "").JSON(t)
			require.EqualValues(t, 200, p["amount_refunded"])
			atProvider := apptest.Ledger(t, w.Provider.URL+"/v1/refunds?reference="+firstPayment)
			require.Len(t, atProvider, 0, "refunds are referenced by their own id, not the payment's")
			for _, r := range []apptest.Answer{r1, r2} {
				id := r.JSON(t)["id"].(string)
				require.Len(t, apptest.Ledger(t, w.Provider.URL+"/v1/refunds?reference="+id), 1, fmt.Sprintf("refund %s made once", id))
			}
			require.EqualValues(t, 2, w.Count(t, "SELECT count(*) FROM refunds WHERE payment_id = ? AND status = 'succeeded'", firstPayment))
		})
	}
}
