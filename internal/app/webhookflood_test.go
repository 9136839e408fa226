package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// lookupCounter is a proxy in front of the provider that counts the
// lookups of charges by key: what each webhook event costs the provider.
type lookupCounter struct {
	lookups atomic.Int64
	proxy   *httputil.ReverseProxy
}

func newLookupCounter(t *testing.T, upstream string) (*lookupCounter, string) {
	t.Helper()
	up, err := url.Parse(upstream)
	require.NoError(t, err)
	c := &lookupCounter{proxy: httputil.NewSingleHostReverseProxy(up)}
	return c, apptest.Serve(t, c)
}

func (c *lookupCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/charges" && r.URL.Query().Has("idempotency_key") {
		c.lookups.Add(1)
	}
	c.proxy.ServeHTTP(w, r)
}

// floodWorld is an API binary whose provider sits behind a lookupCounter,
// on a database of dialect's, for the webhook flood tests.
type floodWorld struct {
	api     *apptest.API
	prov    *provider.Running
	counter *lookupCounter
}

func startFloodWorld(t *testing.T, apiBin string, dialect database.Dialect, env ...string) floodWorld {
	t.Helper()
	dbURL := testkit.DatabaseURL(t, dialect)
	prov, err := provider.StartInProcess(context.Background(), provider.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	counter, proxyURL := newLookupCounter(t, prov.URL)
	api := apptest.StartBinary(t, apiBin, dbURL, apptest.Env(append([]string{"PROVIDER_URL=" + proxyURL}, env...)...))
	return floodWorld{api: api, prov: prov, counter: counter}
}

// chargeEvent is a charge.succeeded event of id about the charge, for
// payment ref.
func chargeEvent(id, charge string, amount int64, currency, ref string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"charge.succeeded","created":%d,"data":{"object":{"id":%q,"object":"charge","status":"succeeded","amount":%d,"currency":%q,"reference":%q}}}`,
		id, time.Now().Unix(), charge, amount, currency, ref)
}

// deliver sends body to the API's webhook, signed with the test secret, and
// returns the status.
func (f floodWorld) deliver(t *testing.T, body []byte) int {
	return apptest.Call(t, "POST", f.api.URL+"/v1/webhooks/provider", "", "", string(body),
		"Provider-Signature", provider.Sign("whsec_test", time.Now(), body)).Status
}

// flood delivers n events, body(i) each, from 20 senders at once, expects
// 200 for every one, and returns the provider lookups they cost.
func (f floodWorld) flood(t *testing.T, n int, body func(i int) []byte) int64 {
	before := f.counter.lookups.Load()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 20 {
		wg.Go(func() {
			for i := range work {
				assert.Equal(t, http.StatusOK, f.deliver(t, body(i)))
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return f.counter.lookups.Load() - before
}

// TestWebhookFloodCostsFewLookups, through the API binary on both dialects,
// with a counting proxy between it and the provider: 200 redeliveries of an
// event the inbox holds, and 500 distinct signed events that lie about one
// succeeded payment (another charge id), sent 20 at a time. Redeliveries
// are answered from the inbox (at most 5 lookups), the lies from one shared
// or held final answer (at most 50); every delivery is acknowledged, no lie
// is recorded, and the payment is unchanged.
func TestWebhookFloodCostsFewLookups(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, _ := apptest.Binaries(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			f := startFloodWorld(t, apiBin, dialect)
			w := f.api

			paid := w.Pay(t, w.CreateOrder(t, "sk_test_acme"), apptest.NewKey(), "pm_card_visa")
			require.Equal(t, http.StatusCreated, paid.Status, string(paid.Body))
			payment := paid.JSON(t)
			paymentID, chargeID := payment["id"].(string), payment["provider_charge_id"].(string)
			amount, currency := int64(payment["amount"].(float64)), payment["currency"].(string)
			event := func(id, charge string) []byte { return chargeEvent(id, charge, amount, currency, paymentID) }

			// The lies first, while nothing about the payment is held: the
			// first ones share a lookup, the rest reuse its final answer.
			start := time.Now()
			lies := f.flood(t, 500, func(i int) []byte {
				return event(fmt.Sprintf("evt_bogus_%d_%s", i, paymentID), fmt.Sprintf("ch_bogus_%d", i))
			})
			t.Logf("%s: 500 distinct signed bogus events: %d provider lookups in %s", dialect, lies, time.Since(start).Round(time.Millisecond))

			// The true event, applied once (a repeat: the request already
			// settled the payment) and recorded in the inbox; then its
			// redeliveries.
			genuine := event("evt_real_"+paymentID, chargeID)
			require.Equal(t, http.StatusOK, f.deliver(t, genuine))
			require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM webhook_events WHERE event_id = ?", "evt_real_"+paymentID))
			start = time.Now()
			redeliveries := f.flood(t, 200, func(int) []byte { return genuine })
			t.Logf("%s: 200 redeliveries of an applied event: %d provider lookups in %s", dialect, redeliveries, time.Since(start).Round(time.Millisecond))

			require.LessOrEqual(t, redeliveries, int64(5), "redeliveries are answered from the inbox")
			require.LessOrEqual(t, lies, int64(50), "lies about one payment share the provider's final answer")
			require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM webhook_events WHERE event_id LIKE 'evt_bogus_%'"), "no lie is recorded")
			require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE id = ? AND status = 'succeeded' AND provider_charge_id = ?", paymentID, chargeID))
			require.Len(t, f.prov.Server.ChargesByReference(paymentID), 1)
		})
	}
}

// TestWebhookFloodAboutAPendingPaymentCostsFewLookups, through the API
// binary on both dialects: a payment whose first attempt did nothing at
// the provider (503) waits, pending, under its provider key; 500 distinct
// signed events that claim it succeeded, sent 20 at a time, each asking
// about a call the provider does not have. No final answer exists to hold,
// so the pace bounds them: one lookup per DefaultEventLookupInterval, the
// events arriving meanwhile answered with its answer at once (at most 50
// lookups, where 210 were counted before the pace). None is believed.
// Then the call lands at the provider, and its true event, sent inside the
// interval of the last absence, is answered at once too; the lookup at
// that interval's end finds the charge and settles the payment and its
// order.
func TestWebhookFloodAboutAPendingPaymentCostsFewLookups(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, _ := apptest.Binaries(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			// The reconciler stays out of the way: the payment stays
			// pending until the test makes its call land.
			f := startFloodWorld(t, apiBin, dialect, "RECONCILE_INTERVAL=1h")
			w := f.api

			first := w.Pay(t, w.CreateOrder(t, "sk_test_acme"), apptest.NewKey(), "pm_fault_unavailable")
			require.Equal(t, http.StatusBadGateway, first.Status, string(first.Body))
			paymentID := first.JSON(t)["payment_id"].(string)
			providerKey := w.Text(t, "SELECT provider_key FROM payments WHERE id = ?", paymentID)
			amount := w.Count(t, "SELECT amount FROM payments WHERE id = ?", paymentID)
			currency := w.Text(t, "SELECT currency FROM payments WHERE id = ?", paymentID)
			pending := w.Text(t, "SELECT status FROM payments WHERE id = ?", paymentID)

			event := func(id, charge string) []byte { return chargeEvent(id, charge, amount, currency, paymentID) }

			start := time.Now()
			lies := f.flood(t, 500, func(i int) []byte {
				return event(fmt.Sprintf("evt_pending_%d_%s", i, paymentID), fmt.Sprintf("ch_bogus_%d", i))
			})
			t.Logf("%s: 500 distinct signed events about a pending payment: %d provider lookups in %s", dialect, lies,
				time.Since(start).Round(time.Millisecond))
			require.LessOrEqual(t, lies, int64(50), "a pending payment's lookups are paced")
			require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM webhook_events WHERE event_id LIKE 'evt_pending_%'"), "no lie is recorded")
			require.Equal(t, pending, w.Text(t, "SELECT status FROM payments WHERE id = ?", paymentID), "the payment did not move")

			// One more lie; the call lands; its true event, inside the
			// lie's interval, is answered at once with the last answer (the
			// provider had no call), and the lookup at the interval's end
			// finds the charge and settles the payment.
			require.Equal(t, http.StatusOK, f.deliver(t, event("evt_pending_last_"+paymentID, "ch_bogus_last")))
			charge := apptest.Send(t, apptest.Request{Method: "POST", URL: f.prov.URL + "/v1/charges", Key: providerKey,
				Body: fmt.Sprintf(`{"amount":%d,"currency":%q,"payment_method":"pm_card_visa","reference":%q}`, amount, currency, paymentID)})
			require.Equal(t, http.StatusCreated, charge.Status, string(charge.Body))
			chargeID := charge.JSON(t)["id"].(string)
			start = time.Now()
			require.Equal(t, http.StatusOK, f.deliver(t, event("evt_true_"+paymentID, chargeID)))
			t.Logf("%s: the true event was answered in %s", dialect, time.Since(start).Round(time.Millisecond))
			testkit.Eventually(t, 10*time.Second, "the payment settled by the lookup at the interval's end", func() bool {
				return w.Count(t, "SELECT count(*) FROM payments WHERE id = ? AND status = 'succeeded' AND provider_charge_id = ?", paymentID, chargeID) == 1
			})
			t.Logf("%s: the payment succeeded %s after its true event was sent", dialect, time.Since(start).Round(time.Millisecond))
			require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM orders o JOIN payments p ON p.order_id = o.id WHERE p.id = ? AND o.status = 'paid'", paymentID))
			require.Len(t, f.prov.Server.ChargesByReference(paymentID), 1)
		})
	}
}
