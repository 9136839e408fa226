package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/client"
	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestAgainstTheRealServer runs the client against the real programs: the
// API and the mock provider, built and started as processes, the provider
// losing and refusing a share of first requests, and a proxy between the
// client and the API that loses every fifth answer after the API has sent
// it whole. Many orders are created and paid (some refunded) concurrently,
// some with the provider's fault methods, which make the API answer 202.
// Whatever was lost and retried, each operation happened once: one order
// per CreateOrder, one payment per order, one charge per payment at the
// provider, one refund per RefundPayment, and every call ends with its final
// outcome.
func TestAgainstTheRealServer(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, provBin := apptest.Binaries(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			runAgainstTheRealServer(t, dialect, apiBin, provBin)
		})
	}
}

// operation is what one worker did for one order.
type operation struct {
	method  string
	order   *client.Order
	payment *client.Payment
	payErr  error
	refund  *client.Refund
}

func runAgainstTheRealServer(t *testing.T, dialect database.Dialect, apiBin, provBin string) {
	dbURL := testkit.DatabaseURL(t, dialect)

	provAddr := testkit.FreeAddr(t)
	provURL := "http://" + provAddr
	// No webhooks: the provider sends one the moment it charges, which
	// settles the payment before the API's call times out, and the client
	// would never see a 202. Without them the reconciler, or the client's
	// retry under the same key, settles it.
	testkit.StartProcess(t, provBin, provAddr,
		"CHAOS_LOST_RESPONSE_RATE=0.25",
		"CHAOS_UNAVAILABLE_RATE=0.25",
	)
	api := apptest.StartBinary(t, apiBin, dbURL, apptest.Env(
		"PROVIDER_URL="+provURL,
		"PROVIDER_TIMEOUT=300ms",
		"RECONCILE_INTERVAL=200ms",
		"IDEMPOTENCY_WAIT=1s",
		"DEMO_SEED=true",
	))
	proxy := &lossyProxy{target: api.URL, every: 5}
	front := apptest.Serve(t, proxy)

	var stats attemptStats
	// The API's breaker in front of the provider opens for 5 s after five
	// failures in a row, and with half of all first calls failing it opens
	// more than once; while it is open every payment answers 502 at once.
	// The breaker is per merchant and every operation here is acme's, so a
	// run of failed probes can hold it open for half a minute or more (a
	// CI run gave up at 60 attempts in 40 s). The retry budget (up to a
	// second between attempts, 150 attempts) outlasts such periods, as a
	// real client's should.
	c := client.New(front, "sk_test_acme",
		client.WithMaxAttempts(150),
		client.WithBackoff(20*time.Millisecond, time.Second),
		client.WithAttemptTimeout(10*time.Second),
		client.WithOnAttempt(stats.record),
	)

	// Besides the provider's random faults, some payments use the fault
	// methods, whose first provider call never answers in time: the API
	// answers 202, and the client asks again under the same key.
	methods := []string{"pm_card_visa", "pm_fault_lost_response", "pm_card_visa", "pm_card_declined", "pm_fault_slow", "pm_card_visa"}
	const orders, workers = 24, 6
	ops := make([]operation, orders)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < orders; i = int(next.Add(1)) - 1 {
				op := &ops[i]
				op.method = methods[i%len(methods)]
				var err error
				op.order, err = c.CreateOrder(ctx, orderParams)
				if err != nil {
					op.payErr = fmt.Errorf("create order: %w", err)
					continue
				}
				op.payment, op.payErr = c.PayOrder(ctx, op.order.ID, client.PayParams{PaymentMethod: op.method})
				if op.payErr == nil && i%3 == 0 {
					op.refund, err = c.RefundPayment(ctx, op.payment.ID, client.RefundParams{Amount: 1000})
					if err != nil {
						op.payErr = fmt.Errorf("refund: %w", err)
					}
				}
			}
		})
	}
	wg.Wait()

	db, err := database.Open(dbURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	count := func(query string, args ...any) int64 {
		t.Helper()
		var n int64
		require.NoError(t, db.Raw(query, args...).Scan(&n).Error)
		return n
	}

	refunds := 0
	for i, op := range ops {
		require.NotNil(t, op.order, "operation %d: %v", i, op.payErr)
		require.EqualValues(t, 1, count("SELECT count(*) FROM payments WHERE order_id = ?", op.order.ID),
			"operation %d: one payment for the order", i)

		var paymentID, chargeStatus string
		switch op.method {
		case "pm_card_visa", "pm_fault_lost_response", "pm_fault_slow":
			require.NoError(t, op.payErr, "operation %d", i)
			require.Equal(t, client.StatusSucceeded, op.payment.Status)
			require.Equal(t, op.order.ID, op.payment.OrderID)
			require.EqualValues(t, 2500, op.payment.Amount)
			paymentID, chargeStatus = op.payment.ID, "succeeded"
			order, err := c.GetOrder(ctx, op.order.ID)
			require.NoError(t, err)
			require.Equal(t, client.OrderStatusPaid, order.Status)
		case "pm_card_declined":
			require.Nil(t, op.payment)
			require.ErrorIs(t, op.payErr, client.ErrPaymentDeclined, "operation %d", i)
			var apiErr *client.APIError
			require.ErrorAs(t, op.payErr, &apiErr)
			require.Equal(t, "card_declined", apiErr.DeclineCode)
			paymentID, chargeStatus = apiErr.PaymentID, "declined"
		}
		charges := apptest.Ledger(t, provURL+"/v1/charges?reference="+paymentID)
		require.Len(t, charges, 1, "operation %d: one charge for payment %s", i, paymentID)
		require.Equal(t, chargeStatus, charges[0]["status"])

		if op.refund != nil {
			refunds++
			require.Equal(t, client.StatusSucceeded, op.refund.Status)
			require.EqualValues(t, 1000, op.refund.Amount)
			require.Len(t, apptest.Ledger(t, provURL+"/v1/refunds?reference="+op.refund.ID), 1, "operation %d: one refund at the provider", i)
			require.EqualValues(t, 1, count("SELECT count(*) FROM refunds WHERE payment_id = ?", paymentID))
			p, err := c.GetPayment(ctx, paymentID)
			require.NoError(t, err)
			require.EqualValues(t, 1000, p.AmountRefunded)
			r, err := c.GetRefund(ctx, op.refund.ID)
			require.NoError(t, err)
			require.Equal(t, op.refund.ID, r.ID)
			require.Equal(t, client.StatusSucceeded, r.Status)
			require.EqualValues(t, 1000, r.Amount)
		}
	}
	require.EqualValues(t, orders, count("SELECT count(*) FROM orders"), "one order per CreateOrder, lost answers included")
	require.EqualValues(t, orders, count("SELECT count(*) FROM payments"))
	require.EqualValues(t, refunds, count("SELECT count(*) FROM refunds"))
	require.Positive(t, refunds)
	require.Positive(t, proxy.dropped.Load(), "answers were lost on the way")
	require.Positive(t, stats.replayed.Load(), "retries after lost answers got replays")
	require.Positive(t, stats.accepted.Load(), "some payments were processing for a while")
	t.Logf("%s: attempts=%d lost_answers=%d accepted_202=%d in_progress_409=%d provider_unavailable_502=%d replayed=%d",
		dialect, stats.attempts.Load(), proxy.dropped.Load(), stats.accepted.Load(), stats.inProgress.Load(),
		stats.unavailable.Load(), stats.replayed.Load())
}

// attemptStats counts what the client saw, for the log of the test.
type attemptStats struct {
	attempts, accepted, inProgress, unavailable, replayed atomic.Int64
}

func (s *attemptStats) record(a client.Attempt) {
	s.attempts.Add(1)
	switch {
	case a.Status == http.StatusAccepted:
		s.accepted.Add(1)
	case errors.Is(a.Err, client.ErrInProgress):
		s.inProgress.Add(1)
	case errors.Is(a.Err, client.ErrProviderUnavailable):
		s.unavailable.Add(1)
	}
	if a.Replayed {
		s.replayed.Add(1)
	}
}

// lossyProxy forwards every request to target, waits for the whole answer
// (so the API has done its work), and loses every n-th answer by closing
// the connection instead of passing it on.
type lossyProxy struct {
	target  string
	every   int64
	n       atomic.Int64
	dropped atomic.Int64
}

func (p *lossyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	// The API's request runs to its end even if the client gives up, as it
	// would over a real network.
	ctx := context.WithoutCancel(r.Context())
	req, err := http.NewRequestWithContext(ctx, r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header = r.Header.Clone()
	// Each answer is checked against the OpenAPI document on the way.
	resp, err := apptest.CheckedClient().Do(req)
	if err != nil {
		closeConnection(w)
		return
	}
	answer, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || p.n.Add(1)%p.every == 0 {
		p.dropped.Add(1)
		closeConnection(w)
		return
	}
	for name, values := range resp.Header {
		w.Header()[name] = values
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

func closeConnection(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		_ = conn.Close()
	}
}
