package app_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/internal/tracing"
)

// TestTracesFromTheBinariesReachAnOTLPReceiver runs cmd/api and
// cmd/provider as processes, both pointed at a small OTLP/HTTP receiver by
// OTEL_EXPORTER_OTLP_ENDPOINT alone, and pays with a lost response: the
// API's and the provider's spans are in one trace, the reconciler's links
// back to it, and nothing exported (names, attributes, events, links, the
// raw protobuf) holds a raw idempotency key, the API key or a body. The
// spans arrive in batches; what is left goes out when SIGTERM stops each
// process.
func TestTracesFromTheBinariesReachAnOTLPReceiver(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, provBin := apptest.Binaries(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			receiver := testkit.StartOTLPReceiver(t)
			otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.URL}
			provAddr := testkit.FreeAddr(t)
			prov := testkit.StartProcess(t, provBin, provAddr, otel...)
			w := apptest.StartBinary(t, apiBin, testkit.DatabaseURL(t, dialect), apptest.Env(append(otel,
				"PROVIDER_URL=http://"+provAddr, "PROVIDER_TIMEOUT=500ms", "RECONCILE_INTERVAL=200ms", "LOG_LEVEL=info")...))

			suffix := apptest.NewKey()
			orderKey, payKey := "e2e-trace-order-"+suffix, "e2e-trace-pay-"+suffix
			body := strings.Replace(apptest.OrderBody, `"metadata":{}`, `"metadata":{"note":"`+secretMarker+`"}`, 1)
			order := apptest.Call(t, "POST", w.URL+"/v1/orders", "sk_test_acme", orderKey, body)
			require.Equal(t, 201, order.Status, string(order.Body))
			payURL := w.URL + "/v1/orders/" + order.JSON(t)["id"].(string) + "/payments"
			payBody := `{"payment_method":"pm_fault_lost_response"}`
			accepted := apptest.Call(t, "POST", payURL, "sk_test_acme", payKey, payBody)
			require.Equal(t, 202, accepted.Status, string(accepted.Body))
			paymentID := accepted.JSON(t)["id"].(string)
			testkit.Eventually(t, 20*time.Second, "the reconciler finished the payment's record", func() bool {
				return keyState(t, w.URL, payKey) == "completed"
			})
			final := apptest.Call(t, "POST", payURL, "sk_test_acme", payKey, payBody)
			require.Equal(t, 201, final.Status, string(final.Body))
			require.Equal(t, "true", final.Header.Get("Idempotent-Replayed"))
			require.Len(t, apptest.Ledger(t, "http://"+provAddr+"/v1/charges?reference="+paymentID), 1)

			// SIGTERM: each process flushes its last batch on the way out.
			w.Process.Stop(20 * time.Second)
			prov.Stop(20 * time.Second)

			got := receiver.Spans()
			var req, rec testkit.ReceivedSpan
			for _, s := range got {
				switch {
				case s.Name == "POST /v1/orders/:id/payments" && s.Attributes[tracing.AttrIdempotencyOutcome] == "executed":
					req = s
				case s.Name == payments.SpanReconcilePayment && s.Attributes[payments.AttrPaymentID] == paymentID:
					rec = s
				}
			}
			require.NotEmpty(t, req.TraceID, "the payment request's span was exported")
			require.Equal(t, "payments-api", req.Service)
			require.Equal(t, "202", req.Attributes["http.response.status_code"])
			require.Equal(t, paymentID, req.Attributes[payments.AttrPaymentID])
			services := map[string]bool{}
			for _, s := range got {
				if s.TraceID == req.TraceID {
					services[s.Service] = true
				}
			}
			require.True(t, services["payments-provider"], "the provider's spans are in the request's trace: %v", services)
			require.NotEmpty(t, rec.TraceID, "the reconciler's span was exported")
			require.Contains(t, rec.Links, testkit.ReceivedLink{TraceID: req.TraceID, SpanID: req.SpanID}, "it links back to the request")
			var lookup bool
			for _, s := range got {
				lookup = lookup || (s.TraceID == rec.TraceID && s.Service == "payments-provider" && s.Name == "GET /v1/charges")
			}
			require.True(t, lookup, "the provider's answer to the reconciler's lookup is in the reconciler's trace")

			for _, secret := range []string{orderKey, payKey, url.PathEscape(payKey), "sk_test_acme", "Bearer", secretMarker, `"sku":"SKU-1"`, "Coffee"} {
				require.False(t, receiver.Contains(secret), "%q was exported", secret)
			}
			// The API's log lines carry the trace id.
			require.Contains(t, w.Logs(), `"trace_id":"`+req.TraceID+`"`)
		})
	}
}
