package metrics

import (
	"context"
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
)

// RecordStats counts the executing idempotency records
// (gormstore.Store).
type RecordStats interface {
	// ExecutingStats returns a store error.
	ExecutingStats(ctx context.Context, now time.Time) (gormstore.ExecutingStats, error)
}

// UnresolvedStats counts the payments and refunds whose provider outcome
// is unknown (paymentsdb.Store).
type UnresolvedStats interface {
	// CountUnresolved returns a store error.
	CountUnresolved(ctx context.Context) (paymentsdb.UnresolvedCounts, error)
}

// WatchDatabase adds the gauges read from the database at scrape time:
// idempotency_records_executing, idempotency_oldest_lock_age_seconds and
// payments_unresolved, plus db_stats_up. They are queried when Prometheus
// scrapes, not sampled in between, so they are never stale and cost
// nothing when nobody looks; timeout bounds the queries so that a slow
// database cannot hang the scrape (the gauges are then left out and
// db_stats_up is 0). Call it once.
func (m *Metrics) WatchDatabase(records RecordStats, unresolved UnresolvedStats, timeout time.Duration) {
	m.reg.MustRegister(&dbCollector{records: records, unresolved: unresolved, timeout: timeout, now: time.Now})
}

// WatchPool exports the connection pool's own statistics as the standard
// go_sql_* metrics with db_name="main": connections open, in use and idle,
// the pool's limit, and go_sql_wait_count_total, the number of times a
// request had to wait for a connection because all were in use. A wait
// count that grows is an exhausted pool. Call it once.
func (m *Metrics) WatchPool(db *sql.DB) {
	m.reg.MustRegister(collectors.NewDBStatsCollector(db, "main"))
}

var (
	descExecuting = prometheus.NewDesc("idempotency_records_executing",
		"Live idempotency records still executing, by lock: held (a request works on it) or free (its lock ran out or was given back: a crashed request, a 502 or a 202 waiting for a retry, the reconciler or a webhook).",
		[]string{"lock"}, nil)
	descOldestLock = prometheus.NewDesc("idempotency_oldest_lock_age_seconds",
		"Age of the oldest executing idempotency record, since its key was reserved; 0 when none. A growing value is a stuck operation.",
		nil, nil)
	descUnresolved = prometheus.NewDesc("payments_unresolved",
		"Payments and refunds whose provider outcome is not known yet, by kind (payment, refund) and status (pending, processing).",
		[]string{"kind", "status"}, nil)
	descOldestPending = prometheus.NewDesc("payments_oldest_pending_attempt_age_seconds",
		"Time since the last attempt of the oldest pending payment or refund (one that has not reached the provider); 0 when none. Above PENDING_CANCEL_AFTER plus a few reconciler rounds, the reconciler is not canceling abandoned attempts.",
		nil, nil)
	descAwaitingOperator = prometheus.NewDesc("payments_awaiting_operator",
		"What waits for an operator (api flagged), by what: flagged_call (the provider's answer failed the money check; nothing applied) or orphan (an orphan refund, or an orphan charge whose automatic refund the provider refused).",
		[]string{"what"}, nil)
	descDBStatsUp = prometheus.NewDesc("db_stats_up",
		"1 when the scrape-time database queries behind idempotency_records_executing, idempotency_oldest_lock_age_seconds and payments_unresolved succeeded, else 0.",
		nil, nil)
)

type dbCollector struct {
	records    RecordStats
	unresolved UnresolvedStats
	timeout    time.Duration
	now        func() time.Time
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descExecuting
	ch <- descOldestLock
	ch <- descUnresolved
	ch <- descOldestPending
	ch <- descAwaitingOperator
	ch <- descDBStatsUp
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	up := 1.0
	now := c.now()
	if stats, err := c.records.ExecutingStats(ctx, now); err != nil {
		up = 0
	} else {
		ch <- prometheus.MustNewConstMetric(descExecuting, prometheus.GaugeValue, float64(stats.Locked), "held")
		ch <- prometheus.MustNewConstMetric(descExecuting, prometheus.GaugeValue, float64(stats.Unlocked), "free")
		age := 0.0
		if !stats.OldestCreatedAt.IsZero() {
			age = max(0, now.Sub(stats.OldestCreatedAt).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(descOldestLock, prometheus.GaugeValue, age)
	}
	if counts, err := c.unresolved.CountUnresolved(ctx); err != nil {
		up = 0
	} else {
		for _, kind := range []struct {
			name   string
			counts map[payments.Status]int
		}{{"payment", counts.Payments}, {"refund", counts.Refunds}} {
			for _, st := range []payments.Status{payments.StatusPending, payments.StatusProcessing} {
				ch <- prometheus.MustNewConstMetric(descUnresolved, prometheus.GaugeValue, float64(kind.counts[st]), kind.name, string(st))
			}
		}
		age := 0.0
		if !counts.OldestPendingAttempt.IsZero() {
			age = max(0, now.Sub(counts.OldestPendingAttempt).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(descOldestPending, prometheus.GaugeValue, age)
		ch <- prometheus.MustNewConstMetric(descAwaitingOperator, prometheus.GaugeValue, float64(counts.FlaggedCalls), "flagged_call")
		ch <- prometheus.MustNewConstMetric(descAwaitingOperator, prometheus.GaugeValue, float64(counts.FlaggedOrphans), "orphan")
	}
	ch <- prometheus.MustNewConstMetric(descDBStatsUp, prometheus.GaugeValue, up)
}
