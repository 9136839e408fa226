// Package app wires the payments API: it opens the database and applies the
// migrations, starts the in-process provider when none is configured,
// builds the idempotency keeper, the payments service, the router and the
// metrics, and serves them with the background workers (janitor,
// reconciler, outbox dispatcher) until its context ends. It is the one
// package that knows every other; cmd/api only reads the configuration and
// calls Run.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/janitor"
	"github.com/idemkeys/payments/internal/idempotency/localcache"
	"github.com/idemkeys/payments/internal/idempotency/locallimit"
	"github.com/idemkeys/payments/internal/idempotency/redisidem"
	"github.com/idemkeys/payments/internal/idempotency/retrywrite"
	"github.com/idemkeys/payments/internal/idempotency/seal"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/metrics"
	"github.com/idemkeys/payments/internal/outbox"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/provider/paymentsport"
	"github.com/idemkeys/payments/internal/redisconn"
	"github.com/idemkeys/payments/internal/tracing"
)

// Run serves the program on cfg.HTTPAddr until ctx ends, then stops it
// gracefully: the API's whole life, as cmd/api runs it.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, opts ...Option) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	a, err := New(ctx, cfg, log, ln, opts...)
	if err != nil {
		_ = ln.Close()
		return err
	}
	return a.Serve(ctx, ln)
}

// App is the wired program: the HTTP handler, the background workers and
// what must be closed on the way out. New builds it; Serve runs it.
type App struct {
	cfg      config.Config
	log      *slog.Logger
	handler  http.Handler
	admin    http.Handler // production's admin listener: /metrics and the probes
	db       *database.DB
	workers  []func(ctx context.Context)
	provider *provider.Running // the in-process provider, if any
	tracing  *tracing.Tracing
	closers  []func() error
}

// webhookRedeliveryWindow is how long common providers redeliver a webhook
// (Stripe: 3 days); a shorter EVENT_RETENTION is allowed, with a warning.
const webhookRedeliveryWindow = 72 * time.Hour

// shutdownFlushTimeout bounds the last export of spans at the end.
const shutdownFlushTimeout = 5 * time.Second

// New wires the program for cfg. ln is the API's listener: the in-process
// provider sends its webhooks there. The database is open and migrated when
// New returns; Serve runs the program and closes it.
func New(ctx context.Context, cfg config.Config, log *slog.Logger, ln net.Listener, opts ...Option) (*App, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	// Gin's debug mode prints every route at start and warns on each run;
	// our own structured logs say what matters.
	gin.SetMode(gin.ReleaseMode)
	announceDevelopment(cfg, log, browsableURL(ln.Addr()))
	// Tracing starts first: the database's connections are traced from
	// the first one (issue 28: pgx's tracer is set as each connects).
	a := &App{cfg: cfg, log: log}
	if err := a.startTracing(ctx, o); err != nil {
		return nil, err
	}
	db, err := openDatabase(ctx, cfg, log, a.tracing)
	if err != nil {
		_ = a.tracing.Shutdown(ctx)
		return nil, err
	}
	a.db = db
	if err := a.wire(ctx, ln, o); err != nil {
		_ = a.close(ctx)
		return nil, err
	}
	return a, nil
}

// wire builds, on the open database, what serves: the merchants, the
// provider and its client, the idempotency keeper, the payments service,
// the router and the background workers, in that order. What it opened
// before a failure, a.close closes.
func (a *App) wire(ctx context.Context, ln net.Listener, o options) error {
	cfg, log, tr, db := a.cfg, a.log, a.tracing, a.db
	// Every layer reports to one registry through the hooks it offers.
	m := metrics.New()
	merchantStore, err := a.openMerchants(ctx, m)
	if err != nil {
		return err
	}
	providerURL, providerTransport, err := a.startProvider(ctx, ln)
	if err != nil {
		return err
	}
	providerClient := a.providerClient(providerURL, providerTransport, m)
	k, err := a.newKeeper(ctx, m)
	if err != nil {
		return err
	}
	sink, err := a.newOutboxSink(ctx, k.redis.client)
	if err != nil {
		return err
	}
	idem := ginidem.New(k.keeper, ginidem.Options{Scope: handlers.MerchantID, Answer: handlers.ErrorAnswer})

	store := paymentsdb.New(db.DB)
	service := paymentsService(store, m.InstrumentProvider(paymentsport.New(providerClient)), k.keeper,
		payments.WithProviderEvents(cfg.ProviderTimeout, m.WebhookEvent, log),
		payments.WithTracer(tr))
	// Closed first (closers run last first): its lookups set for later
	// still use the keeper and the database.
	a.closers = append(a.closers, func() error { service.Close(); return nil })
	m.WatchDatabase(k.store, store, 2*time.Second)
	if sqlDB, err := db.DB.DB(); err == nil {
		m.WatchPool(sqlDB)
	}

	secret := cfg.ProviderWebhookSecret
	router := handlers.NewRouter(handlers.Deps{
		Log:            log,
		TrustedProxies: cfg.TrustedProxies,
		Orders:         service,
		Payments:       service,
		Customers:      service,
		Auth:           merchantStore,
		Atomic:         o.ordersMiddleware(idem),
		Guarded:        idem.Guarded,
		VerifyWebhook: func(header string, body []byte) error {
			return provider.VerifySignature(secret, header, body, time.Now(), 5*time.Minute)
		},
		MaxBodyBytes: cfg.MaxBodyBytes,
		ReadTimeout:  cfg.HTTPReadTimeout,
		// A write waits for its turn on a hot order or payment no longer
		// than it would have waited on the row itself (5 s when no bound
		// is set on the database side).
		MaxWritesPerResource: cfg.MaxWritesPerResource,
		ResourceWait:         cmp.Or(cfg.DBLockTimeout, 5*time.Second),
		// Production's demo page asks for a key; it never offers one.
		DemoAPIKey: demoPageKey(cfg),
		Database:   db,
		Redis:      k.redis.pinger,
		OutboxSink: sink.name,
		NATS:       sink.nats,

		ProviderBreakers: providerClient.OpenBreakers,

		IdempotencyKeys: k.records,
		HashKey:         handlers.NewKeyHasher([]byte(cfg.LogKeySecret)),
		Middleware:      []gin.HandlerFunc{m.HTTPMiddleware()},
		Tracing:         traceRequests(tr),
	})
	if err := a.serveRouter(router, providerURL, m, o); err != nil {
		return err
	}
	a.workers = a.backgroundWorkers(k, store, sink.publisher, m)
	return nil
}

// openMerchants is the merchants' store: in production it refuses to
// start on the demo merchants' public keys and refuses those keys if they
// appear later; with DEMO_SEED the demo merchants are seeded. Unknown keys
// are counted in m and bounded per client.
func (a *App) openMerchants(ctx context.Context, m *metrics.Metrics) (*merchants.Store, error) {
	cfg := a.cfg
	merchantStore := merchants.NewStore(a.db.DB, time.Now)
	if cfg.Production() {
		if err := refuseDemoKeys(ctx, merchantStore); err != nil {
			return nil, err
		}
		merchantStore.RefuseDemoKeys(warnDemoKeys(a.log))
	}
	if cfg.DemoSeed {
		if err := merchantStore.SeedDemo(ctx); err != nil {
			return nil, fmt.Errorf("seed demo merchants: %w", err)
		}
	}
	merchantStore.LimitUnknownKeys(cfg.UnknownKeyBudget, cfg.UnknownKeyWindow, m.APIKeyLookup)
	return merchantStore, nil
}

// providerClient is the client of the payment provider at url, with one
// circuit breaker per merchant whose changes are logged and counted in m.
func (a *App) providerClient(url string, transport http.RoundTripper, m *metrics.Metrics) *provider.Client {
	breakerLog := a.log.With("component", "provider")
	client := provider.NewClient(url, provider.ClientOptions{
		Timeout: a.cfg.ProviderTimeout, Transport: transport, WrapTransport: a.tracing.Transport,
		Breaker: provider.BreakerSettings{OnStateChange: func(merchant, from, to string) {
			// One breaker per merchant (provider.BreakerSettings): the
			// merchant is in the log line, never a metric label.
			breakerLog.Warn("provider circuit breaker changed state", "merchant_id", merchant, "from", from, "to", to)
			m.BreakerChanged(to)
		}},
	})
	m.WatchBreakers(client.OpenBreakers)
	return client
}

// keeperParts is the idempotency keeper and what was built for it: the
// store as the keeper and the janitor use it (its failures counted), the
// store itself and Redis's parts.
type keeperParts struct {
	keeper  *idempotency.Keeper
	records metrics.Store
	store   *gormstore.Store
	redis   redisParts
}

// newKeeper builds the idempotency keeper: its store (checked against the
// provider key secret), Redis's cache and quota when REDIS_URL is set,
// the hooks of metrics and tracing, the new-key quota and the retried
// record writes.
func (a *App) newKeeper(ctx context.Context, m *metrics.Metrics) (keeperParts, error) {
	cfg, log, tr := a.cfg, a.log, a.tracing
	idemStore, cipher, err := idempotencyStore(cfg, a.db, log)
	if err == nil {
		err = checkKeySecret(ctx, cfg, idemStore)
	}
	if err != nil {
		return keeperParts{}, err
	}
	rd, err := a.openRedis(cipher)
	if err != nil {
		return keeperParts{}, err
	}
	records := m.InstrumentStore(idemStore, string(a.db.Dialect))
	idemCfg := keeperConfig(cfg, log, idemStore, rd.answers)
	idemCfg.Observer = m.IdempotencyObserver()
	idemCfg.OnReconcile = func(_, result string) { m.Reconciled(result) }
	if tr.Enabled() {
		idemCfg.TraceParent, idemCfg.Span = tr.TraceParent, tr.StartLinked
		idemCfg.Observer = tracing.Observer(idemCfg.Observer)
	}
	// The quota of new keys: shared through Redis, or else counted by this
	// instance alone.
	quota := rd.quota
	if quota == nil {
		quota = newKeyLimiter(cfg)
	}
	if quota != nil {
		idemCfg.NewKey = locallimit.Gate(records, quota)
	}
	// A record write that fails (an answer stored, a key given back) is
	// tried again in the background until the lock timeout; the writes
	// under way are waited for at shutdown.
	writes := retrywrite.New(100*time.Millisecond, 2*time.Second, cfg.IdempotencyLockTimeout)
	idemCfg.Retry = writes.Retry
	a.closers = append(a.closers, func() error {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return writes.Close(closeCtx)
	})
	return keeperParts{keeper: idempotency.New(records, idemCfg), records: records, store: idemStore, redis: rd}, nil
}

// serveRouter adds to router what is not the API (Swagger UI, and in
// development the provider's ledger and /metrics), puts production's
// /metrics on the admin listener, and makes router the program's handler.
func (a *App) serveRouter(router *gin.Engine, providerURL string, m *metrics.Metrics, o options) error {
	handlers.RegisterSwagger(router)
	if a.provider != nil && !a.cfg.Production() {
		// The ledger holds every merchant's charges, unauthenticated: a
		// development aid that production never serves, in-process
		// provider or not.
		if err := devProviderRoutes(router, providerURL); err != nil {
			return err
		}
	}
	if a.cfg.Production() {
		// Platform-wide figures are not for tenants: production serves them
		// on its admin listener only, with the health probes (Serve).
		a.admin = handlers.NewAdminRouter(m.Handler(), router)
	} else {
		router.GET("/metrics", gin.WrapH(m.Handler()))
	}
	a.handler = router
	if o.wrap != nil {
		a.handler = o.wrap(router)
	}
	return nil
}

// redisParts is what Redis adds when REDIS_URL is set, each nil without
// it: the client the outbox may publish through, the answers' cache behind
// this instance's memory, the same cache as what /readyz pings, and the
// new-key quota every instance shares (nil too when RATE_LIMIT_NEW_KEYS is
// 0).
type redisParts struct {
	client  redis.UniversalClient
	answers idempotency.Cache
	pinger  handlers.Pinger
	quota   locallimit.Quota
}

// openRedis opens Redis when REDIS_URL is set, and nothing otherwise. Redis
// accelerates (replays, wake-ups, the shared rate limit); PostgreSQL stays
// the truth, so Redis being down at start is no reason to refuse to start.
// cipher, when set, seals the answers the cache holds.
func (a *App) openRedis(cipher *seal.Cipher) (redisParts, error) {
	cfg := a.cfg
	if cfg.RedisURL == "" {
		return redisParts{}, nil
	}
	client, err := redisconn.Open(cfg.RedisURL, redisconn.Options{Timeout: cfg.RedisTimeout})
	if err == nil {
		err = traceRedis(client, a.tracing)
	}
	if err != nil {
		return redisParts{}, err
	}
	cache := redisidem.NewCache(client, cfg.RedisKeySecret(), a.log.With("component", "redis")).WithTimeout(cfg.RedisTimeout)
	if cipher != nil {
		cache.WithCipher(cipher)
	}
	a.closers = append(a.closers, func() error { cache.Close(); return client.Close() })
	r := redisParts{client: client, answers: cache, pinger: cache}
	if cfg.RateLimitNewKeys > 0 {
		limiter := redisidem.NewLimiter(client, cfg.RateLimitNewKeys, cfg.RateLimitWindow, cfg.RedisTimeout)
		a.closers = append(a.closers, func() error { limiter.Close(); return nil })
		r.quota = limiter
	}
	return r, nil
}

// backgroundWorkers are what Serve runs beside the API, one set per
// instance: the reconciler of outside calls, the purge of expired
// idempotency records, the outbox's dispatcher, and the retention of
// published events and applied webhooks.
func (a *App) backgroundWorkers(k keeperParts, store *paymentsdb.Store, publisher outbox.Publisher, m *metrics.Metrics) []func(context.Context) {
	cfg, log := a.cfg, a.log
	dispatcher := outbox.NewDispatcher(a.db.DB, publisher, cfg.OutboxInterval, log.With("component", "outbox"))
	purge := &retention{
		keep: cfg.EventRetention, interval: cfg.JanitorInterval, batch: retentionBatch, pause: retentionPause,
		now: func() time.Time { return time.Now().UTC() }, log: log.With("component", "retention"),
		purges: []retentionPurge{
			{name: "outbox_events", purge: dispatcher.PurgePublished},
			{name: "webhook_events", purge: store.PurgeWebhookEvents},
		},
	}
	if cfg.EventRetention < webhookRedeliveryWindow {
		log.Warn("EVENT_RETENTION is shorter than the redelivery window of common providers (3 days): an event redelivered after its inbox row is purged is checked with the provider again",
			"event_retention", cfg.EventRetention)
	}
	purgeRecords := janitor.New(k.records, janitor.Config{Interval: cfg.JanitorInterval, OnPurge: m.Purged, Log: log})
	reconcile := reconciler(k.keeper, cfg.ReconcileInterval, log)
	return []func(context.Context){reconcile, purgeRecords.Run, dispatcher.Run, purge.run}
}

// startProvider runs the mock provider in this process when PROVIDER_URL is
// empty, sending its webhooks to this very API (ln), and returns the URL the
// provider client calls and the transport that reaches it: nil, over the
// network, but for production's mock, served in memory.
func (a *App) startProvider(ctx context.Context, ln net.Listener) (string, http.RoundTripper, error) {
	cfg, log, tr := a.cfg, a.log, a.tracing
	if cfg.ProviderURL != "" {
		return cfg.ProviderURL, nil, nil
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	pcfg := provider.Config{
		WebhookURL:    "http://" + net.JoinHostPort("127.0.0.1", port) + "/v1/webhooks/provider",
		WebhookSecret: cfg.ProviderWebhookSecret,
		// Real providers send their events a while after the call; a
		// webhook that always beat the API's own timeout would hide the
		// 202-and-reconcile path that lost responses take.
		WebhookDelay: cfg.ProviderWebhookDelay,
		Logger:       log.With("component", "provider"),
		// The mock continues the API's traces as cmd/provider does.
		Instrument:       func(h http.Handler) http.Handler { return tr.Handler(h, "provider") },
		WebhookTransport: tr.Transport(nil),
	}
	if cfg.Production() {
		// In production nobody but this process may reach the mock,
		// and no client may make it lose answers or hold a payment:
		// served in memory, no listener, the pm_fault_* methods off.
		pcfg.NoFaults = true
		a.provider = provider.StartInMemory(pcfg)
		log.Warn("the payment provider is the in-process mock, served in memory (PROVIDER_URL is empty)")
		return a.provider.URL, a.provider.Transport, nil
	}
	running, err := provider.StartInProcess(ctx, pcfg)
	if err != nil {
		return "", nil, fmt.Errorf("start in-process provider: %w", err)
	}
	a.provider = running
	// Debug, and an address rather than a URL: nobody opens it (its
	// ledger is under /dev/provider/), and a random port on the first
	// screen looked like one more page to visit.
	log.Debug("in-process payment provider started", "addr", strings.TrimPrefix(running.URL, "http://"))
	return running.URL, nil, nil
}

// announceDevelopment says first, in development, where to point a browser
// and what a development deployment lets anyone do, so that nobody mistakes
// it for a production one. It names pages and settings, never a key or a
// secret: the log may travel further than the machine. For people (text)
// that is a few short lines; for machines (json), two records.
func announceDevelopment(cfg config.Config, log *slog.Logger, base string) {
	if cfg.Production() {
		return
	}
	pages := []struct{ key, name, url string }{
		{"demo", "the checkout demo", base + "/demo"},
		{"swagger_ui", "Swagger UI", base + "/swagger/index.html"},
		{"api", "the API", base},
	}
	if cfg.ProviderURL == "" {
		pages = append(pages, struct{ key, name, url string }{"provider_ledger", "the mock provider's ledger", base + devProviderPrefix + "/v1/ledger"})
	}
	var public []string
	if cfg.DemoSeed {
		public = append(public, "the demo merchants acme and globex, whose API keys are public (DEMO_SEED)")
	}
	if cfg.ProviderWebhookSecret == config.DemoWebhookSecret {
		public = append(public, "webhooks signed with the well-known test secret (PROVIDER_WEBHOOK_SECRET)")
	}
	if cfg.LogKeySecret == "" {
		public = append(public, "no LOG_KEY_SECRET: key hashes in the log change at every start")
	}

	if !cfg.LogText() {
		where := make([]any, 0, 2*len(pages))
		for _, p := range pages {
			where = append(where, p.key, p.url)
		}
		log.Info("development: open these in a browser (the demo merchants' API keys are in the README)", where...)
		if len(public) == 0 {
			log.Info("development mode (APP_ENV=development)")
			return
		}
		log.Warn("development mode (APP_ENV=development): not for production", "in_force", public)
		return
	}
	log.Info("Development mode. Open in a browser:")
	for _, p := range pages {
		log.Info(fmt.Sprintf("  %-27s %s", p.name, p.url))
	}
	if cfg.DemoSeed {
		log.Info(`The demo merchants' API keys are in the README, under "Two commands".`)
	}
	if len(public) > 0 {
		log.Warn("Not for production. In force:")
		for _, p := range public {
			log.Warn("  " + p)
		}
	}
}

// browsableURL is the http:// URL of a listening address, with localhost
// for an address that listens on every interface (":8080").
func browsableURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// Handler is the program's HTTP handler: every route, /metrics and
// /swagger included.
func (a *App) Handler() http.Handler { return a.handler }

// Serve serves the program on ln, with its background workers, until ctx
// ends. Then it stops taking requests, waits up to SHUTDOWN_TIMEOUT for the
// ones in flight, stops the workers and closes what New opened. It returns
// nil after a graceful stop.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	cfg, log := a.cfg, a.log
	// Connections are bounded, per client address and in all; the
	// server's own error answers become problem+json
	// (handlers.GuardListener). At MAX_CONNS the connection idle the
	// longest yields its place, so idle connections cannot lock new
	// clients out; the guard learns which are idle from ConnState.
	guard := handlers.GuardListener(ln, handlers.ConnLimits{PerClient: cfg.MaxConnsPerClient, Total: cfg.MaxConns, IPv6Prefix: cfg.MaxConnsIPv6Prefix})
	srv := a.httpServer(a.handler)
	srv.ConnState = guard.ConnState

	// Background workers stop after the server has finished its in-flight
	// requests; the database closes after them.
	workerCtx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	var workers sync.WaitGroup
	for _, w := range a.workers {
		workers.Go(func() { w(workerCtx) })
	}
	defer func() {
		stopWorkers()
		workers.Wait()
		log.Info("workers stopped")
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := a.close(closeCtx); err != nil {
			log.Warn("closing", "error", err)
		}
	}()

	serveErr := make(chan error, 2)
	if a.admin != nil {
		adminLn, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen on METRICS_ADDR %s: %w", cfg.MetricsAddr, err)
		}
		// The admin listener has a cap of its own, so that a flood of
		// connections there takes neither the scrapes nor the process's
		// descriptors; its idle connections yield as the API's do.
		adminGuard := handlers.GuardListener(adminLn, handlers.ConnLimits{Total: cfg.MetricsMaxConns, IPv6Prefix: cfg.MaxConnsIPv6Prefix})
		admin := a.httpServer(a.admin)
		admin.ConnState = adminGuard.ConnState
		go func() {
			if err := admin.Serve(adminGuard); !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("admin listener: %w", err)
			}
		}()
		defer func() { _ = admin.Close() }()
		log.Info("admin listening: /metrics, /healthz, /readyz", "addr", adminLn.Addr().String())
	}
	go func() { serveErr <- srv.Serve(guard) }()
	log.Info("listening", "addr", guard.Addr().String(), "dialect", string(a.db.Dialect))

	select {
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: no new requests; waiting for in-flight ones", "timeout", cfg.ShutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("graceful shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// httpServer is a server of h with the API's deadlines and header bound.
// Every phase of a connection has a deadline, so that a client that sends
// slowly, reads slowly or idles holds a connection for bounded time
// (config checks the write timeout against the longest payment); headers
// are bounded (net/http reads up to 4 KiB past MAX_HEADER_BYTES).
// "OPTIONS *" goes to h like any request, to be answered as one: Go's
// own answer to it is an empty 200.
func (a *App) httpServer(h http.Handler) *http.Server {
	cfg := a.cfg
	return &http.Server{
		Handler:                      h,
		DisableGeneralOptionsHandler: true,
		MaxHeaderBytes:               cfg.MaxHeaderBytes,
		ReadHeaderTimeout:            cfg.HTTPReadHeaderTimeout,
		ReadTimeout:                  cfg.HTTPReadTimeout,
		WriteTimeout:                 cfg.HTTPWriteTimeout,
		IdleTimeout:                  cfg.HTTPIdleTimeout,
		ErrorLog:                     slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
}

// close releases what New opened.
func (a *App) close(ctx context.Context) error {
	var errs []error
	if a.provider != nil {
		errs = append(errs, a.provider.Shutdown(ctx))
	}
	// Last opened, first closed: the background record writes still use
	// the database until they end.
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	errs = append(errs, a.db.Close())
	return errors.Join(errs...)
}

// NewLogger is the program's logger: JSON lines on w at level (debug, info,
// warn or error, as config.Config.LogLevel holds it), with the trace and
// span ids of a record logged with a traced context.
func NewLogger(w io.Writer, level string) *slog.Logger {
	// Lines logged inside a trace carry its trace_id and span_id.
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: logLevel(level)})))
}

// idempotencyStore is the idempotency store the configuration asks for,
// and the cipher of stored answers (nil when they are not encrypted).
func idempotencyStore(cfg config.Config, db *database.DB, log *slog.Logger) (*gormstore.Store, *seal.Cipher, error) {
	cipher, err := responseCipher(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	opts := []gormstore.Option{gormstore.WithClassify(database.Classify)}
	if cfg.IdempotencyTombstones {
		opts = append(opts, gormstore.WithTombstones(cfg.IdempotencyTombstoneTTL))
	}
	if cipher != nil {
		opts = append(opts, gormstore.WithCipher(cipher))
	}
	return gormstore.New(db.DB, opts...), cipher, nil
}

// newKeyLimiter is this instance's own quota of new keys per merchant, or
// nil when RATE_LIMIT_NEW_KEYS is 0 (no quota).
func newKeyLimiter(cfg config.Config) locallimit.Quota {
	if cfg.RateLimitNewKeys <= 0 {
		return nil
	}
	return locallimit.New(cfg.RateLimitNewKeys, cfg.RateLimitWindow, nil)
}

// keeperConfig is the idempotency core's configuration from the
// environment's, without the hooks (metrics, tracing, the new-key quota)
// that serving adds. next, when set, is where this instance's memory of
// answers looks for the ones it does not hold (Redis).
func keeperConfig(cfg config.Config, log *slog.Logger, store *gormstore.Store, next idempotency.Cache) idempotency.Config {
	return idempotency.Config{
		TTL:          cfg.IdempotencyTTL,
		LockTimeout:  cfg.IdempotencyLockTimeout,
		Wait:         cfg.IdempotencyWait,
		MaxBodyBytes: cfg.MaxBodyBytes,
		Transactor:   store,
		Log:          log,
		// Replays of the keys this instance answered, from its memory,
		// then from next.
		Cache: localcache.New(localcache.DefaultSize, next),

		KeySecret:          []byte(cfg.ProviderKeySecret),
		PreviousKeySecrets: previousKeySecrets(cfg),
		ReconcileInterval:  cfg.ReconcileInterval,
		CancelAfter:        cfg.PendingCancelAfter,
	}
}
