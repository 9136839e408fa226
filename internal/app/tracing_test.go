package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/outbox"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/internal/tracing"
)

// spans is what an in-memory exporter recorded, with the questions the
// tests ask of it.
type spans []tracetest.SpanStub

func (ss spans) attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// find returns the spans named name whose attribute key is value (any
// value when key is "").
func (ss spans) find(name, key, value string) spans {
	var out spans
	for _, s := range ss {
		if s.Name == name && (key == "" || ss.attr(s, key) == value) {
			out = append(out, s)
		}
	}
	return out
}

// servers keeps the server spans (an HTTP client span and the server span
// it reaches share their name).
func (ss spans) servers() spans {
	var out spans
	for _, s := range ss {
		if s.SpanKind == trace.SpanKindServer {
			out = append(out, s)
		}
	}
	return out
}

// one is find that must match exactly one span.
func (ss spans) one(t *testing.T, name, key, value string) tracetest.SpanStub {
	t.Helper()
	got := ss.find(name, key, value)
	require.Len(t, got, 1, "spans named %q with %s=%q; all spans:\n%s", name, key, value, ss)
	return got[0]
}

// descends reports whether s is below ancestor in its trace.
func (ss spans) descends(s, ancestor tracetest.SpanStub) bool {
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, x := range ss {
		byID[x.SpanContext.SpanID()] = x
	}
	for range len(ss) {
		if !s.Parent.IsValid() || s.Parent.TraceID() != ancestor.SpanContext.TraceID() {
			return false
		}
		if s.Parent.SpanID() == ancestor.SpanContext.SpanID() {
			return true
		}
		parent, ok := byID[s.Parent.SpanID()]
		if !ok {
			return false
		}
		s = parent
	}
	return false
}

// linksTo reports whether s links to target.
func linksTo(s, target tracetest.SpanStub) bool {
	for _, l := range s.Links {
		if l.SpanContext.TraceID() == target.SpanContext.TraceID() && l.SpanContext.SpanID() == target.SpanContext.SpanID() {
			return true
		}
	}
	return false
}

func (ss spans) String() string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "  %s trace=%s span=%s parent=%s %v\n", s.Name, s.SpanContext.TraceID(), s.SpanContext.SpanID(), s.Parent.SpanID(), s.Attributes)
	}
	return b.String()
}

// text is everything a span holds as text: what a trace viewer would show.
func text(s tracetest.SpanStub) string {
	return fmt.Sprint(s.Name, s.Attributes, s.Events, s.Links, s.Status, s.Resource)
}

// recordSpans is a Tracing that records every span in memory, synchronously.
func recordSpans(t *testing.T) (*tracing.Tracing, func() spans) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp), func() spans { return spans(exp.GetSpans()) }
}

func traceParentOf(s tracetest.SpanStub) string {
	return fmt.Sprintf("00-%s-%s-01", s.SpanContext.TraceID(), s.SpanContext.SpanID())
}

// TestTraceFollowsALostResponseToItsStoredAnswer follows one payment whose
// provider answer is lost, on each dialect: the request's 202 and the
// provider's charge in one trace; the reconciler's lookup at the provider
// and the finisher storing the final answer in another, linked back to the
// request; the replay; the outbox event carrying the trace of the
// transaction that wrote it. No span holds a raw key, an API key or a body.
func TestTraceFollowsALostResponseToItsStoredAnswer(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			tr, recorded := recordSpans(t)
			rs := testkit.StartRedis(t)
			api := apptest.Start(t, testkit.DatabaseURL(t, dialect), debugLogs, apptest.WithApp(app.WithTracing(tr)),
				apptest.WithSilentProvider(provider.Config{Instrument: func(h http.Handler) http.Handler { return tr.Handler(h, "provider") }}),
				apptest.Env("PROVIDER_TIMEOUT=300ms", "RECONCILE_INTERVAL=100ms", "LOG_KEY_SECRET=a-log-secret-for-the-tests",
					"REDIS_URL="+rs.URL(), "OUTBOX_INTERVAL=50ms"))

			suffix := apptest.NewKey()
			orderKey, payKey := "trace-order-"+suffix, "trace-pay-"+suffix
			body := strings.Replace(apptest.OrderBody, `"metadata":{}`, `"metadata":{"note":"`+secretMarker+`"}`, 1)
			order := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", orderKey, body)
			require.Equal(t, 201, order.Status, string(order.Body))
			orderID := order.JSON(t)["id"].(string)

			payBody := `{"payment_method":"pm_fault_lost_response"}`
			accepted := apptest.Call(t, "POST", api.URL+"/v1/orders/"+orderID+"/payments", "sk_test_acme", payKey, payBody,
				"X-Request-Id", "req-trace-"+suffix)
			require.Equal(t, 202, accepted.Status, string(accepted.Body))
			paymentID := accepted.JSON(t)["id"].(string)
			testkit.Eventually(t, 15*time.Second, "the reconciler finished the payment's record", func() bool {
				return keyState(t, api.URL, payKey) == "completed"
			})
			final := apptest.Call(t, "POST", api.URL+"/v1/orders/"+orderID+"/payments", "sk_test_acme", payKey, payBody)
			require.Equal(t, 201, final.Status, string(final.Body))
			require.Equal(t, "true", final.Header.Get("Idempotent-Replayed"))
			// A path that is a key, matched and unmatched (a method its
			// route does not serve).
			require.Equal(t, 200, apptest.Call(t, "GET", api.URL+"/v1/idempotency-keys/"+url.PathEscape(orderKey), "sk_test_acme", "", "").Status)
			require.Equal(t, 405, apptest.Call(t, "POST", api.URL+"/v1/idempotency-keys/"+url.PathEscape(payKey), "sk_test_acme", "", "").Status)
			testkit.Eventually(t, 10*time.Second, "the outbox published every event", func() bool {
				return api.Count(t, "SELECT count(*) FROM outbox_events WHERE published_at IS NULL") == 0
			})
			require.NoError(t, api.Stop())
			all := recorded()
			charges := apptest.Ledger(t, api.Provider.URL+"/v1/charges?reference="+paymentID)
			require.Len(t, charges, 1, "one charge at the provider")
			const payRoute = "POST /v1/orders/:id/payments"
			// The request: 202, executed, findable by the payment id and
			// the request id, with the key's hash and never the key.
			req := all.one(t, payRoute, tracing.AttrIdempotencyOutcome, "executed")
			require.Equal(t, "202", all.attr(req, "http.response.status_code"))
			require.Equal(t, paymentID, all.attr(req, payments.AttrPaymentID))
			require.Equal(t, "req-trace-"+suffix, all.attr(req, "request.id"))
			require.Len(t, all.attr(req, "idempotency.key_hash"), 12)
			require.Equal(t, "/v1/orders/:id/payments", all.attr(req, "http.route"))
			// The provider's charge, in the request's trace, under the
			// client span that sent traceparent.
			charge := all.servers().one(t, "POST /v1/charges", "", "")
			require.True(t, all.descends(charge, req), "the provider continued the request's trace\n%s", all)
			// The database, inside the request.
			var dbInRequest int
			for _, s := range all {
				if all.attr(s, "db.system.name") != "" && all.descends(s, req) {
					dbInRequest++
				}
			}
			require.Positive(t, dbInRequest, "the request's statements are its children")

			// The reconciler: a new trace linked to the request, with the
			// provider's lookup below it, and the finisher storing the
			// final answer, linked to the request too.
			// On a slow machine a first pass can come while the request
			// still holds the call, and leave it for the next: every pass
			// is a trace of its own linked to the request, and the pass
			// that looked the charge up is the one the rest hangs under.
			lookup := all.servers().one(t, "GET /v1/charges", "", "")
			passes := all.find(payments.SpanReconcilePayment, payments.AttrPaymentID, paymentID)
			require.NotEmpty(t, passes, "the reconciler's spans\n%s", all)
			var rec tracetest.SpanStub
			for _, pass := range passes {
				require.NotEqual(t, req.SpanContext.TraceID(), pass.SpanContext.TraceID())
				require.True(t, linksTo(pass, req), "the reconciler's span links to the request")
				if all.descends(lookup, pass) {
					rec = pass
				}
			}
			require.True(t, rec.SpanContext.IsValid(), "the lookup is a reconciler pass's\n%s", all)
			finishes := all.find(payments.SpanFinishPayment, payments.AttrPaymentID, paymentID)
			require.NotEmpty(t, finishes, "the finisher stored the answer\n%s", all)
			finish := finishes[0]
			require.True(t, all.descends(finish, rec))
			require.True(t, linksTo(finish, req), "the stored answer links to the request")
			var stored bool
			for _, s := range all {
				stored = stored || (all.descends(s, finish) && strings.Contains(all.attr(s, "db.query.text"), "idempotency_records"))
			}
			require.True(t, stored, "the finisher's write of the record is in its span\n%s", all)
			// The replay, its own request.
			all.one(t, payRoute, tracing.AttrIdempotencyOutcome, "replayed")
			require.Len(t, all.find("POST /v1/orders", tracing.AttrIdempotencyOutcome, "executed"), 1)

			// Stored beside the rows: the payment has the request's trace
			// context, the order's event its request's, the payment's
			// event the reconciler's (whose transaction wrote it).
			orderReq := all.one(t, "POST /v1/orders", tracing.AttrIdempotencyOutcome, "executed")
			require.EqualValues(t, 1, api.Count(t, "SELECT count(*) FROM payments WHERE id = ? AND trace_parent = ?", paymentID, traceParentOf(req)))
			require.EqualValues(t, 1, api.Count(t, "SELECT count(*) FROM outbox_events WHERE type = 'order.created' AND trace_parent = ?", traceParentOf(orderReq)))
			require.EqualValues(t, 1, api.Count(t, "SELECT count(*) FROM outbox_events WHERE type = 'payment.succeeded' AND trace_parent LIKE ?",
				"00-"+rec.SpanContext.TraceID().String()+"-%"))

			// Redis, inside the requests (the replay's cache look-up), and
			// the outbox's stream entries with the trace context stored.
			var redisInRequest bool
			for _, s := range all {
				redisInRequest = redisInRequest || (all.attr(s, "db.system") == "redis" && s.Parent.IsValid())
			}
			require.True(t, redisInRequest, "Redis commands are spans of the requests\n%s", all)
			entries, err := rs.Client(t).XRange(context.Background(), outbox.StreamKey, "-", "+").Result()
			require.NoError(t, err)
			var carried int
			for _, e := range entries {
				switch e.Values[outbox.FieldType] {
				case payments.EventOrderCreated:
					require.Equal(t, traceParentOf(orderReq), e.Values[outbox.FieldTraceParent])
					carried++
				case payments.EventPaymentSucceeded:
					require.Contains(t, e.Values[outbox.FieldTraceParent], rec.SpanContext.TraceID().String())
					carried++
				}
			}
			require.Equal(t, 2, carried, "both events went out with their trace context")

			// The key-scrubbing: no raw key, API key or body anywhere.
			keyRoutes := append(all.find("GET /v1/idempotency-keys/*key", "", ""), all.find("POST", "", "")...)
			require.NotEmpty(t, keyRoutes)
			for _, s := range keyRoutes {
				require.Equal(t, "/v1/idempotency-keys/*key", all.attr(s, "url.path"))
			}
			for _, s := range all {
				txt := text(s)
				for _, secret := range []string{orderKey, payKey, url.PathEscape(orderKey), "sk_test_acme", "Bearer", secretMarker, "pm_fault_lost_response\"", `"sku":"SKU-1"`, "Coffee"} {
					require.NotContains(t, txt, secret, "span %q", s.Name)
				}
			}
			// Traces start at a request or a reconciliation, never at the
			// background polling of the database or Redis.
			for _, s := range all {
				if !s.Parent.IsValid() && s.Name != payments.SpanReconcilePayment {
					require.Equal(t, trace.SpanKindServer, s.SpanKind, "a root span %q\n%s", s.Name, all)
				}
			}
			// Log lines carry the trace id.
			require.Contains(t, api.Logs(), `"trace_id":"`+req.SpanContext.TraceID().String()+`"`)
			require.Contains(t, api.Logs(), `"trace_id":"`+rec.SpanContext.TraceID().String()+`"`)
		})
	}
}

// TestTraceWebhookCarriesTheProvidersTrace: the provider's webhook about a
// charge arrives in the charge's trace, which is the paying request's.
func TestTraceWebhookCarriesTheProvidersTrace(t *testing.T) {
	tr, recorded := recordSpans(t)
	api := apptest.Start(t, testkit.DatabaseURL(t, testkit.Dialects[len(testkit.Dialects)-1]), apptest.WithApp(app.WithTracing(tr)),
		apptest.WithProvider(provider.Config{
			Instrument:           func(h http.Handler) http.Handler { return tr.Handler(h, "provider") },
			WebhookTransport:     tr.Transport(nil),
			DuplicateWebhookRate: -1,
		}))
	orderID := api.CreateOrder(t, "sk_test_acme")
	paid := api.Pay(t, orderID, apptest.NewKey(), "pm_card_visa")
	require.Equal(t, 201, paid.Status, string(paid.Body))
	// The provider's client span ends after the API's server span, once
	// the answer is back: wait for both.
	testkit.Eventually(t, 15*time.Second, "the webhook arrived and its delivery ended", func() bool {
		all := recorded()
		hooks := all.servers().find("POST /v1/webhooks/provider", "", "")
		if len(hooks) != 1 {
			return false
		}
		for _, s := range all {
			if s.SpanContext.SpanID() == hooks[0].Parent.SpanID() {
				return true
			}
		}
		return false
	})
	all := recorded()
	req := all.one(t, "POST /v1/orders/:id/payments", "", "")
	hook := all.servers().one(t, "POST /v1/webhooks/provider", "", "")
	require.Equal(t, req.SpanContext.TraceID(), hook.SpanContext.TraceID(), "one trace: request, charge, webhook")
	var client tracetest.SpanStub
	for _, s := range all {
		if s.SpanContext.SpanID() == hook.Parent.SpanID() {
			client = s
		}
	}
	require.Equal(t, trace.SpanKindClient, client.SpanKind, "the provider's delivery sent the traceparent")
	require.True(t, all.descends(client, all.servers().one(t, "POST /v1/charges", "", "")), "the delivery belongs to the charge")
	require.Contains(t, hook.Attributes, attribute.String("url.path", "/v1/webhooks/provider"))
}
