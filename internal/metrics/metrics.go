// Package metrics is the API's Prometheus instrumentation: what an operator
// watches to see retries, conflicts, stuck records and unknown provider
// outcomes before customers do.
//
// Everything lives in one Metrics value with a registry of its own (no
// global registry, no init): internal/app builds it and hands its pieces to
// the layers through the hooks they already offer, so no domain package
// imports Prometheus:
//
//	idempotency.Config.Observer    IdempotencyObserver: outcomes, waits, processing time
//	idempotency.Store              InstrumentStore: store errors
//	janitor.Config.OnPurge         Purged: records purged
//	payments.Provider              InstrumentProvider: provider calls and latency
//	idempotency.Config.OnReconcile Reconciled: reconciliation results
//	provider.BreakerSettings       BreakerChanged, WatchBreakers: circuit breakers
//	handlers.Deps.Middleware       HTTPMiddleware: latency by route and status
//	scrape time                    WatchDatabase: executing records, oldest lock, unresolved payments
//
// Labels are bounded: route templates ("/v1/orders/:id/payments", never a
// path), fixed outcome and status sets, the method folded to the standard
// ones. No label ever carries an idempotency key, an API key or an id.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
)

// RouteUnmatched is the route label of a request no route matched, so that
// probing random paths cannot grow the label set.
const RouteUnmatched = "unmatched"

// durationBuckets (seconds) reach past the provider timeout and the
// idempotency wait, where the interesting tails are.
var durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Metrics holds every metric of the API and the registry they live in.
// Its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	httpDuration     *prometheus.HistogramVec
	idemRequests     *prometheus.CounterVec
	idemWait         *prometheus.HistogramVec
	idemProcessing   *prometheus.HistogramVec
	janitorPurged    prometheus.Counter
	storeErrors      *prometheus.CounterVec
	providerCalls    *prometheus.CounterVec
	providerDuration *prometheus.HistogramVec
	reconciliations  *prometheus.CounterVec
	webhookEvents    *prometheus.CounterVec
	breakerChanges   *prometheus.CounterVec
	apiKeyLookups    *prometheus.CounterVec

	// The children of the two vectors every request counts in, by label
	// values (children).
	durations *children[httpLabels, prometheus.Observer]
	outcomes  *children[outcomeLabels, prometheus.Counter]
}

type httpLabels struct {
	method, route string
	status        int
}

type outcomeLabels struct{ route, outcome string }

// New returns the API's metrics on a fresh registry, with the Go runtime
// and process collectors.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by method, route template and status.",
			Buckets: durationBuckets,
		}, []string{"method", "route", "status"}),
		idemRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idempotency_requests_total",
			Help: "Keyed requests by route template and what the idempotency layer did: executed, replayed, mismatch, in_progress, invalid_key, missing_key, recovered, invalid_body, rate_limited, error.",
		}, []string{"route", "outcome"}),
		idemWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idempotency_wait_seconds",
			Help:    "How long a duplicate waited for its original, by route template.",
			Buckets: durationBuckets,
		}, []string{"route"}),
		idemProcessing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idempotency_processing_seconds",
			Help:    "How long the handler of an executed or recovered keyed request ran, by route template.",
			Buckets: durationBuckets,
		}, []string{"route"}),
		janitorPurged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idempotency_janitor_purged_total",
			Help: "Expired idempotency records the janitor deleted.",
		}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idempotency_store_errors_total",
			Help: "Failed idempotency store operations (not the answers ErrKeyExists, ErrNotFound, ErrFenced), by store (postgres, sqlite, redis) and operation.",
		}, []string{"store", "op"}),
		providerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payment_provider_calls_total",
			Help: "Calls to the payment provider by operation and outcome: succeeded, declined, not_executed, unknown, no_such_call.",
		}, []string{"op", "outcome"}),
		providerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "payment_provider_call_duration_seconds",
			Help:    "Latency of calls to the payment provider, by operation.",
			Buckets: durationBuckets,
		}, []string{"op"}),
		reconciliations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_reconciliations_total",
			Help: "Outside calls the reconciler looked at, by result: resolved, unresolved, canceled, flagged, orphan, confirmed, error.",
		}, []string{"result"}),
		webhookEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_webhook_events_total",
			Help: "Signed provider events by what became of them once the provider was asked: applied, repeat, unknown, forged (the provider does not confirm it), mismatch (the provider's amount or currency differs from ours).",
		}, []string{"outcome"}),
		breakerChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payment_provider_breaker_transitions_total",
			Help: "State changes of the provider client's circuit breakers (one per merchant, one for calls that name none), by the state entered: open, half-open, closed.",
		}, []string{"to"}),
		apiKeyLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "api_key_lookups_total",
			Help: "API keys the caches did not know, by result: known and unknown (each a database read), demo (a demo merchant's public key found in production's database, refused), limited (refused unread: the client address was over UNKNOWN_KEY_BUDGET).",
		}, []string{"result"}),
	}
	m.durations = newChildren(func(l httpLabels) prometheus.Observer {
		return m.httpDuration.WithLabelValues(l.method, l.route, strconv.Itoa(l.status))
	})
	m.outcomes = newChildren(func(l outcomeLabels) prometheus.Counter {
		return m.idemRequests.WithLabelValues(l.route, l.outcome)
	})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpDuration, m.idemRequests, m.idemWait, m.idemProcessing, m.janitorPurged,
		m.storeErrors, m.providerCalls, m.providerDuration, m.reconciliations,
		m.webhookEvents, m.breakerChanges, m.apiKeyLookups,
	)
	m.startAtZero()
	return m
}

// startAtZero creates every child of the bounded label sets, so that rate()
// and absent() work from the first scrape.
func (m *Metrics) startAtZero() {
	for _, r := range []string{"known", "unknown", "demo", "limited"} {
		m.apiKeyLookups.WithLabelValues(r)
	}
	for _, op := range providerOps {
		m.providerDuration.WithLabelValues(op)
		for _, o := range providerOutcomes {
			m.providerCalls.WithLabelValues(op, o)
		}
	}
	// The results idempotency.Config.OnReconcile hears.
	for _, r := range []string{"resolved", "unresolved", "canceled", "flagged", "orphan", "confirmed", "error"} {
		m.reconciliations.WithLabelValues(r)
	}
	for _, o := range []payments.EventOutcome{payments.EventApplied, payments.EventRepeat, payments.EventUnknown, payments.EventForged, payments.EventMismatch, payments.EventOrphan} {
		m.webhookEvents.WithLabelValues(string(o))
	}
	for _, to := range []string{"open", "half-open", "closed"} {
		m.breakerChanges.WithLabelValues(to)
	}
}

// Registry is where the metrics live (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format, for
// GET /metrics. A collector that fails (the database at scrape time) does
// not fail the scrape: the rest is served, and db_stats_up says so.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:      m.reg,
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// HTTPMiddleware measures every request by method, route template and
// status (handlers.Deps.Middleware). A request no route matched is
// RouteUnmatched; a method outside the standard ones is "other".
func (m *Metrics) HTTPMiddleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		defer func() {
			status := c.Writer.Status()
			p := recover()
			if p != nil {
				// The recovery middleware further out answers 500.
				status = http.StatusInternalServerError
			}
			m.durations.get(httpLabels{methodLabel(c.Request.Method), routeLabel(c.FullPath()), status}).
				Observe(time.Since(start).Seconds())
			if p != nil {
				panic(p)
			}
		}()
		c.Next()
	}
}

// IdempotencyObserver is the idempotency.Config.Observer that feeds the
// idempotency_* metrics.
func (m *Metrics) IdempotencyObserver() idempotency.Observer { return observer{m} }

// Purged counts records the janitor deleted (janitor.Config.OnPurge).
func (m *Metrics) Purged(n int) { m.janitorPurged.Add(float64(n)) }

// WebhookEvent counts one provider event's outcome
// (payments.WithProviderEvents).
func (m *Metrics) WebhookEvent(outcome string) { m.webhookEvents.WithLabelValues(outcome).Inc() }

// APIKeyLookup counts one API key the caches did not know, by result
// (merchants.Store.LimitUnknownKeys).
func (m *Metrics) APIKeyLookup(result string) { m.apiKeyLookups.WithLabelValues(result).Inc() }

// Reconciled counts one reconciliation result
// (idempotency.Config.OnReconcile).
func (m *Metrics) Reconciled(result string) { m.reconciliations.WithLabelValues(result).Inc() }

// BreakerChanged counts one state change of a provider circuit breaker
// (provider.BreakerSettings.OnStateChange); to is the state entered. The
// merchant is not a label: it is in the log line.
func (m *Metrics) BreakerChanged(to string) { m.breakerChanges.WithLabelValues(to).Inc() }

// WatchBreakers adds the gauge payment_provider_breakers_open, read at
// scrape time from open (provider.Client.OpenBreakers).
func (m *Metrics) WatchBreakers(open func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "payment_provider_breakers_open",
		Help: "Provider circuit breakers open or half-open now (one per merchant, one for calls that name none); any makes /readyz degraded.",
	}, func() float64 { return float64(open()) }))
}

// StoreError counts a failed operation of an idempotency store that is not
// wrapped by InstrumentStore (a Redis layer reporting its own failures).
func (m *Metrics) StoreError(store, op string) { m.storeErrors.WithLabelValues(store, op).Inc() }

type observer struct{ m *Metrics }

func (o observer) Outcome(_ context.Context, route string, out string) {
	o.m.outcomes.get(outcomeLabels{routeLabel(route), out}).Inc()
}

func (o observer) Waited(_ context.Context, route string, d time.Duration) {
	o.m.idemWait.WithLabelValues(routeLabel(route)).Observe(d.Seconds())
}

func (o observer) Processed(_ context.Context, route string, d time.Duration) {
	o.m.idemProcessing.WithLabelValues(routeLabel(route)).Observe(d.Seconds())
}

func routeLabel(route string) string {
	if route == "" {
		return RouteUnmatched
	}
	return route
}

// methodLabel keeps the method label bounded: net/http accepts any token
// as a method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// children keeps the child metric of each set of label values a vector was
// asked for. WithLabelValues checks, hashes and looks up its values on
// every call, and every request makes two such calls; a map of the few
// dozen sets in use (methods, routes, statuses, outcomes: all bounded)
// answers for less.
type children[L comparable, M any] struct {
	mu    sync.RWMutex
	m     map[L]M
	child func(L) M
}

func newChildren[L comparable, M any](child func(L) M) *children[L, M] {
	return &children[L, M]{m: map[L]M{}, child: child}
}

func (c *children[L, M]) get(labels L) M {
	c.mu.RLock()
	m, ok := c.m[labels]
	c.mu.RUnlock()
	if ok {
		return m
	}
	m = c.child(labels)
	c.mu.Lock()
	c.m[labels] = m
	c.mu.Unlock()
	return m
}
