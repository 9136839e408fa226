package metrics_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/metrics"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
)

// scrape reads m's /metrics and returns each sample line's value by its
// series ("name{a="x",b="y"}", labels in exposition order).
func scrape(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	out := map[string]float64{}
	sc := bufio.NewScanner(w.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	return out
}

type fakeProvider struct {
	charge payments.ChargeResult
	err    error
}

func (f fakeProvider) Charge(context.Context, string, payments.ChargeRequest) (payments.ChargeResult, error) {
	return f.charge, f.err
}

func (f fakeProvider) FindCharge(context.Context, string) (payments.ChargeResult, error) {
	return f.charge, f.err
}

func (f fakeProvider) Refund(context.Context, string, payments.RefundRequest) (payments.RefundResult, error) {
	return payments.RefundResult{Succeeded: f.charge.Succeeded}, f.err
}

func (f fakeProvider) FindRefund(context.Context, string) (payments.RefundResult, error) {
	return payments.RefundResult{Succeeded: f.charge.Succeeded}, f.err
}

func TestProviderCallsByOutcome(t *testing.T) {
	cases := []struct {
		name    string
		fake    fakeProvider
		outcome string
	}{
		{"succeeded", fakeProvider{charge: payments.ChargeResult{Succeeded: true}}, "succeeded"},
		{"declined", fakeProvider{}, "declined"},
		{"not executed", fakeProvider{err: fmt.Errorf("charge: %w", payments.ErrProviderNotExecuted)}, "not_executed"},
		{"unknown", fakeProvider{err: fmt.Errorf("charge: %w", payments.ErrProviderUnknown)}, "unknown"},
		{"no such call", fakeProvider{err: fmt.Errorf("find: %w", payments.ErrProviderNoSuchCall)}, "no_such_call"},
		{"anything else is unknown", fakeProvider{err: errors.New("boom")}, "unknown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New()
			p := m.InstrumentProvider(tc.fake)
			ctx := context.Background()
			_, err := p.Charge(ctx, "pay_1", payments.ChargeRequest{})
			require.ErrorIs(t, err, tc.fake.err)
			_, _ = p.FindCharge(ctx, "pay_1")
			_, _ = p.Refund(ctx, "re_1", payments.RefundRequest{})
			_, _ = p.FindRefund(ctx, "re_1")

			got := scrape(t, m)
			for _, op := range []string{"charge", "find_charge", "refund", "find_refund"} {
				require.Equal(t, 1.0, got[fmt.Sprintf(`payment_provider_calls_total{op=%q,outcome=%q}`, op, tc.outcome)], op)
				require.Equal(t, 1.0, got[fmt.Sprintf(`payment_provider_call_duration_seconds_count{op=%q}`, op)], op)
			}
			// The other outcomes exist at zero.
			require.Contains(t, got, `payment_provider_calls_total{op="charge",outcome="no_such_call"}`)
		})
	}
}

// failingStore answers every call with err.
type failingStore struct{ err error }

func (s failingStore) Insert(context.Context, *idempotency.Record) error { return s.err }
func (s failingStore) Get(context.Context, string, string, time.Time) (*idempotency.Record, error) {
	return nil, s.err
}
func (s failingStore) TakeOver(context.Context, string, string, int64, time.Time, time.Time) (*idempotency.Record, error) {
	return nil, s.err
}
func (s failingStore) Checkpoint(context.Context, string, string, int64, string, time.Time) error {
	return s.err
}
func (s failingStore) Complete(context.Context, string, string, int64, idempotency.Answer, time.Time) error {
	return s.err
}
func (s failingStore) Release(context.Context, string, string, int64, time.Time) error { return s.err }
func (s failingStore) PurgeExpired(context.Context, time.Time, int) (int, error)       { return 0, s.err }
func (s failingStore) PurgeTombstones(context.Context, time.Time, int) (int, error)    { return 0, s.err }
func (s failingStore) InsertCall(context.Context, *idempotency.Call) error             { return s.err }
func (s failingStore) LockCall(context.Context, string, string) (*idempotency.Call, error) {
	return nil, s.err
}
func (s failingStore) SaveCall(context.Context, *idempotency.Call) error { return s.err }
func (s failingStore) CountCalls(context.Context, string, string, string, time.Time) (int, error) {
	return 0, s.err
}
func (s failingStore) ClaimDue(context.Context, time.Time, time.Time, int, int) ([]idempotency.Call, error) {
	return nil, s.err
}

func TestStoreErrorsCountFailuresNotAnswers(t *testing.T) {
	cases := []struct {
		err     error
		counted bool
	}{
		{nil, false},
		{idempotency.ErrKeyExists, false},
		{idempotency.ErrNotFound, false},
		{idempotency.ErrFenced, false},
		{context.Canceled, false},
		{fmt.Errorf("%w: connection refused", database.ErrUnavailable), true},
		{errors.New("syntax error"), true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.err), func(t *testing.T) {
			m := metrics.New()
			s := m.InstrumentStore(failingStore{err: tc.err}, "postgres")
			ctx, now := context.Background(), time.Now()
			require.ErrorIs(t, s.Insert(ctx, &idempotency.Record{}), tc.err)
			_, err := s.Get(ctx, "m", "k", now)
			require.ErrorIs(t, err, tc.err)
			_, _ = s.TakeOver(ctx, "m", "k", 1, now, now)
			_ = s.Checkpoint(ctx, "m", "k", 1, "p", now)
			_ = s.Complete(ctx, "m", "k", 1, idempotency.Answer{}, now)
			_ = s.Release(ctx, "m", "k", 1, now)
			_, _ = s.PurgeExpired(ctx, now, 10)
			_, _ = s.PurgeTombstones(ctx, now, 10)
			_ = s.InsertCall(ctx, &idempotency.Call{})
			_, _ = s.LockCall(ctx, "m", "c")
			_ = s.SaveCall(ctx, &idempotency.Call{})
			_, _ = s.CountCalls(ctx, "m", "k", "charge", now)
			_, _ = s.ClaimDue(ctx, now, now, 10, 1)

			// Every operation's series exists from the start (at 0), and a
			// failure moves that series, not one of another name.
			got := scrape(t, m)
			want := 0.0
			if tc.counted {
				want = 1
			}
			for _, op := range []string{"insert", "get", "take_over", "checkpoint", "complete", "release", "purge", "purge_tombstones",
				"insert_call", "lock_call", "save_call", "count_calls", "claim_due"} {
				series := fmt.Sprintf(`idempotency_store_errors_total{op=%q,store="postgres"}`, op)
				require.Contains(t, got, series)
				require.Equal(t, want, got[series], op)
			}
		})
	}
}

func TestObserverJanitorAndReconciler(t *testing.T) {
	m := metrics.New()
	obs := m.IdempotencyObserver()
	ctx := context.Background()
	obs.Outcome(ctx, "/v1/orders", "executed")
	obs.Outcome(ctx, "/v1/orders", "replayed")
	obs.Outcome(ctx, "/v1/orders", "replayed")
	obs.Outcome(ctx, "", "missing_key")
	obs.Waited(ctx, "/v1/orders", 30*time.Millisecond)
	obs.Processed(ctx, "/v1/orders", 10*time.Millisecond)
	m.Purged(3)
	m.Purged(2)
	m.Reconciled("resolved")

	got := scrape(t, m)
	require.Equal(t, 1.0, got[`idempotency_requests_total{outcome="executed",route="/v1/orders"}`])
	require.Equal(t, 2.0, got[`idempotency_requests_total{outcome="replayed",route="/v1/orders"}`])
	require.Equal(t, 1.0, got[`idempotency_requests_total{outcome="missing_key",route="unmatched"}`])
	require.Equal(t, 1.0, got[`idempotency_wait_seconds_count{route="/v1/orders"}`])
	require.InDelta(t, 0.03, got[`idempotency_wait_seconds_sum{route="/v1/orders"}`], 1e-9)
	require.Equal(t, 1.0, got[`idempotency_processing_seconds_count{route="/v1/orders"}`])
	require.Equal(t, 5.0, got[`idempotency_janitor_purged_total`])
	require.Equal(t, 1.0, got[`payments_reconciliations_total{result="resolved"}`])
	require.Equal(t, 0.0, got[`payments_reconciliations_total{result="error"}`])
	require.Contains(t, got, `go_goroutines`)
}

func TestHTTPLatencyLabelsAreBounded(t *testing.T) {
	gin.SetMode(gin.TestMode)
	m := metrics.New()
	r := gin.New()
	r.Use(func(c *gin.Context) {
		defer func() {
			if recover() != nil {
				c.AbortWithStatus(http.StatusInternalServerError)
			}
		}()
		c.Next()
	})
	r.Use(m.HTTPMiddleware())
	r.GET("/v1/orders/:id", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.GET("/panic", func(*gin.Context) { panic("boom") })

	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/v1/orders/ord_1", nil),
		httptest.NewRequest(http.MethodGet, "/v1/orders/ord_2", nil),
		httptest.NewRequest(http.MethodGet, "/v1/secret-probe/sk_test_acme", nil),
		httptest.NewRequest("BREW", "/v1/orders/ord_3", nil),
		httptest.NewRequest(http.MethodGet, "/panic", nil),
	} {
		r.ServeHTTP(httptest.NewRecorder(), req)
	}

	got := scrape(t, m)
	require.Equal(t, 2.0, got[`http_request_duration_seconds_count{method="GET",route="/v1/orders/:id",status="200"}`])
	require.Equal(t, 1.0, got[`http_request_duration_seconds_count{method="GET",route="unmatched",status="404"}`])
	require.Equal(t, 1.0, got[`http_request_duration_seconds_count{method="other",route="unmatched",status="404"}`])
	require.Equal(t, 1.0, got[`http_request_duration_seconds_count{method="GET",route="/panic",status="500"}`])
	for series := range got {
		require.NotContains(t, series, "ord_1")
		require.NotContains(t, series, "sk_test_acme")
		require.NotContains(t, series, "BREW")
	}
}

type fakeStats struct {
	exec       gormstore.ExecutingStats
	unresolved paymentsdb.UnresolvedCounts
	err        error
}

func (f fakeStats) ExecutingStats(context.Context, time.Time) (gormstore.ExecutingStats, error) {
	return f.exec, f.err
}

func (f fakeStats) CountUnresolved(context.Context) (paymentsdb.UnresolvedCounts, error) {
	return f.unresolved, f.err
}

func TestDatabaseGaugesAtScrapeTime(t *testing.T) {
	t.Run("counts", func(t *testing.T) {
		m := metrics.New()
		m.WatchDatabase(fakeStats{
			exec: gormstore.ExecutingStats{Locked: 2, Unlocked: 1, OldestCreatedAt: time.Now().Add(-time.Minute)},
			unresolved: paymentsdb.UnresolvedCounts{
				Payments: map[payments.Status]int{payments.StatusProcessing: 3},
				Refunds:  map[payments.Status]int{payments.StatusPending: 1},
			},
		}, fakeStats{unresolved: paymentsdb.UnresolvedCounts{
			Payments: map[payments.Status]int{payments.StatusProcessing: 3},
			Refunds:  map[payments.Status]int{payments.StatusPending: 1},
		}}, time.Second)
		got := scrape(t, m)
		require.Equal(t, 2.0, got[`idempotency_records_executing{lock="held"}`])
		require.Equal(t, 1.0, got[`idempotency_records_executing{lock="free"}`])
		require.InDelta(t, 60, got[`idempotency_oldest_lock_age_seconds`], 5)
		require.Equal(t, 3.0, got[`payments_unresolved{kind="payment",status="processing"}`])
		require.Equal(t, 0.0, got[`payments_unresolved{kind="payment",status="pending"}`])
		require.Equal(t, 1.0, got[`payments_unresolved{kind="refund",status="pending"}`])
		require.Equal(t, 1.0, got[`db_stats_up`])
	})
	t.Run("a failing database does not fail the scrape", func(t *testing.T) {
		m := metrics.New()
		down := fakeStats{err: database.ErrUnavailable}
		m.WatchDatabase(down, down, time.Second)
		got := scrape(t, m)
		require.Equal(t, 0.0, got[`db_stats_up`])
		require.NotContains(t, got, `idempotency_oldest_lock_age_seconds`)
		require.Contains(t, got, `go_goroutines`)
	})
}
