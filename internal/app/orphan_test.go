package app_test

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestOrphanChargeIsRefundedOnce, through the binaries: a payment is
// canceled by the reconciler (its only attempt answered 503, and nobody
// came back for it), then something that does not fence its calls (an
// instance of a version before fencing, a hand at the provider) charges
// under the payment's provider key. The provider's webhook and the
// reconcilers' late look at the canceled call all find the orphan charge:
// it is refunded exactly once, for what the provider charged, the payment
// stays canceled, the order stays payable, and one log line tells.
// PostgreSQL runs two instances, so that two reconcilers and a webhook race.
func TestOrphanChargeIsRefundedOnce(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, _ := apptest.Binaries(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			// The provider's webhooks go to the first instance, whose
			// address is known only once it runs.
			var apiURL atomic.Value
			forward := apptest.Serve(t, &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
				target, _ := url.Parse(apiURL.Load().(string))
				r.SetURL(target)
			}})
			prov, err := provider.StartInProcess(context.Background(), provider.Config{WebhookURL: forward + "/v1/webhooks/provider"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
			env := apptest.Env("PROVIDER_URL="+prov.URL, "IDEMPOTENCY_LOCK_TIMEOUT=2s", "PROVIDER_TIMEOUT=1500ms", "PENDING_CANCEL_AFTER=3s",
				"RECONCILE_INTERVAL=200ms", "LOG_LEVEL=info")
			instances := []*apptest.API{apptest.StartBinary(t, apiBin, dbURL, env)}
			apiURL.Store(instances[0].URL)
			if dialect == database.Postgres {
				instances = append(instances, apptest.StartBinary(t, apiBin, dbURL, env))
			}
			w := instances[0]

			order := w.CreateOrder(t, "sk_test_acme")
			refused := w.Pay(t, order, apptest.NewKey(), "pm_fault_unavailable")
			require.Equal(t, 502, refused.Status, string(refused.Body))
			paymentID := refused.JSON(t)["payment_id"].(string)
			testkit.Eventually(t, 30*time.Second, "the reconciler cancels the payment nobody came back for", func() bool {
				return w.Count(t, "SELECT count(*) FROM payments WHERE id = ? AND status = 'canceled'", paymentID) == 1
			})
			require.Empty(t, prov.Server.ChargesByReference(paymentID), "canceled: nothing at the provider")

			// The charge nobody asked for, under the payment's own key, as
			// the first attempt sent it.
			key := w.Text(t, "SELECT provider_key FROM payments WHERE id = ?", paymentID)
			client := provider.NewClient(prov.URL, provider.ClientOptions{})
			charge, err := client.CreateCharge(context.Background(), key, provider.ChargeRequest{
				Amount: 2500, Currency: "BRL", PaymentMethod: "pm_fault_unavailable", Reference: paymentID})
			require.NoError(t, err)
			require.Equal(t, provider.ChargeSucceeded, charge.Status)

			testkit.Eventually(t, 30*time.Second, "the orphan charge is refunded", func() bool {
				return w.Count(t, "SELECT count(*) FROM orphans WHERE provider_id = ? AND status = 'refunded'", charge.ID) == 1
			})
			orphanID := w.Text(t, "SELECT id FROM orphans WHERE provider_id = ?", charge.ID)
			// More rounds, the late look included, and the redeliveries:
			// nothing more happens.
			time.Sleep(3 * time.Second)
			refunds := prov.Server.RefundsByReference(orphanID)
			require.Len(t, refunds, 1, "refunded once")
			require.Equal(t, charge.ID, refunds[0].Charge)
			require.EqualValues(t, 2500, refunds[0].Amount)
			require.Equal(t, provider.RefundSucceeded, refunds[0].Status)
			require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM orphans"))
			require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM outside_calls WHERE kind = 'orphan_refund' AND state = 'done'"))
			require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE id = ? AND status = 'canceled'", paymentID))
			require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM outside_calls WHERE state = 'canceled' AND due_at IS NOT NULL"), "the late look was taken")

			told := 0
			for _, api := range instances {
				told += strings.Count(api.Logs(), "orphan charge: the provider holds a succeeded charge")
			}
			require.Equal(t, 1, told, "one log line")

			// The order is payable again, and its payment charges once.
			paid := w.Pay(t, order, apptest.NewKey(), "pm_card_visa")
			require.Equal(t, http.StatusCreated, paid.Status, string(paid.Body))
			require.Len(t, prov.Server.ChargesByReference(paid.JSON(t)["id"].(string)), 1)
		})
	}
}
