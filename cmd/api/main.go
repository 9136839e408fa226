// Command api is the payments API: orders, payments and refunds behind
// Idempotency-Key, over PostgreSQL or an embedded SQLite file.
//
// Usage:
//
//	api                          serve (the default)
//	api migrate                  apply the migrations and exit
//	api create-merchant -name N  create a merchant and print its API key once
//
// Configuration comes from the environment; see internal/config.
//
//	@title						Idempotent Payments API
//	@version					1.0
//	@description				A reference payments backend for idempotency keys done right: every POST carries an Idempotency-Key, and for one merchant and one key the business effect happens at most once. A repeat gets the stored answer with Idempotent-Replayed: true; a different request under the same key gets 422; a repeat while the original runs waits, then gets 409 with Retry-After.
//	@BasePath					/
//	@securityDefinitions.apikey	ApiKeyAuth
//	@in							header
//	@name						Authorization
//	@description				"Bearer " followed by the API key, e.g. "Bearer sk_test_acme".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/metrics"
	"github.com/idemkeys/payments/internal/outbox"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/provider/paymentsport"
	"github.com/idemkeys/payments/internal/redisconn"
	"github.com/idemkeys/payments/migrations"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

// run is the whole program behind main, so tests can start it in-process:
// it returns when ctx ends (after a graceful stop) or on a fatal error.
func run(ctx context.Context, args, environ []string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	cfg, err := config.Load(environ)
	if err != nil {
		return err
	}
	log := newLogger(stdout, cfg.LogLevel)
	// Gin's debug mode prints every route at start and warns on each run;
	// our own structured logs say what matters.
	gin.SetMode(gin.ReleaseMode)

	switch cmd {
	case "serve":
		return serve(ctx, cfg, log)
	case "migrate":
		db, err := openDatabase(ctx, cfg, log)
		if err != nil {
			return err
		}
		defer db.Close()
		fmt.Fprintf(stdout, "migrations applied; schema version %d (%s)\n", mustVersion(ctx, db), db.Dialect)
		return nil
	case "create-merchant":
		return createMerchant(ctx, cfg, log, args, stdout)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: api [serve | migrate | create-merchant -name NAME]")
		return nil
	default:
		return fmt.Errorf("unknown command %q (try: serve, migrate, create-merchant)", cmd)
	}
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(strings.ToUpper(level)))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// openDatabase connects, retrying with backoff for DB_CONNECT_TIMEOUT (the
// database may start after us), and applies the migrations.
func openDatabase(ctx context.Context, cfg config.Config, log *slog.Logger) (*database.DB, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.DBConnectTimeout)
	defer cancel()
	connect := func() (*database.DB, error) {
		db, err := database.Open(cfg.DatabaseURL, database.Options{SQLitePath: cfg.SQLitePath, MaxOpenConns: cfg.DBMaxConns})
		if err != nil {
			if errors.Is(err, database.ErrUnavailable) {
				return nil, err
			}
			return nil, backoff.Permanent(err)
		}
		if err := db.Ping(ctx); err != nil {
			_ = db.Close()
			return nil, err
		}
		return db, nil
	}
	// Retry with exponential backoff until the whole DB_CONNECT_TIMEOUT is
	// spent (the database may start after us), then say why we gave up.
	b := backoff.NewExponentialBackOff()
	b.MaxInterval = 2 * time.Second
	var db *database.DB
	var err, cause error
	for {
		if db, err = connect(); err == nil {
			break
		}
		// Keep the most telling reason: the attempt cut short by the
		// deadline only says "deadline exceeded".
		if cause == nil || !errors.Is(err, context.DeadlineExceeded) {
			cause = err
		}
		var permanent *backoff.PermanentError
		if errors.As(err, &permanent) {
			return nil, fmt.Errorf("database: %w", permanent.Unwrap())
		}
		wait := b.NextBackOff()
		deadline, _ := ctx.Deadline()
		if left := time.Until(deadline); left <= 0 {
			return nil, fmt.Errorf("database unreachable after %s: %w", cfg.DBConnectTimeout, cause)
		} else if wait > left {
			wait = left
		}
		log.Warn("database not reachable yet; retrying", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("database unreachable after %s: %w", cfg.DBConnectTimeout, cause)
			}
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	sqlDB, err := db.DB.DB()
	if err != nil {
		return nil, err
	}
	applied, err := migrations.Up(ctx, sqlDB, string(db.Dialect))
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	log.Info("database ready", "dialect", string(db.Dialect), "migrations_applied", applied)
	return db, nil
}

func mustVersion(ctx context.Context, db *database.DB) int64 {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return -1
	}
	v, err := migrations.Version(ctx, sqlDB, string(db.Dialect))
	if err != nil {
		return -1
	}
	return v
}

func createMerchant(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("create-merchant", flag.ContinueOnError)
	name := fs.String("name", "", "merchant name (unique)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" {
		return errors.New("create-merchant: -name is required")
	}
	db, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	m, key, err := merchants.NewStore(db.DB, time.Now).Create(ctx, *name)
	if err != nil {
		return fmt.Errorf("create-merchant: %w", err)
	}
	fmt.Fprintf(stdout, "merchant %s (%s) created\nAPI key, shown once: %s\n", m.ID, m.Name, key)
	return nil
}

// app is the wired program: the HTTP handler, the background workers and
// what must be closed on the way out. newApp builds it; serve runs it.
type app struct {
	handler  http.Handler
	db       *database.DB
	workers  []func(ctx context.Context)
	provider *provider.Running // the in-process provider, if any
	closers  []func() error
}

// newApp wires the program for cfg. ln is the API's listener: the
// in-process provider sends its webhooks there. opts reach the payments
// service (tests install a phase hook with them).
func newApp(ctx context.Context, cfg config.Config, log *slog.Logger, ln net.Listener, opts ...payments.Option) (*app, error) {
	db, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	a := &app{db: db}
	merchantStore := merchants.NewStore(db.DB, time.Now)
	if cfg.DemoSeed {
		if err := merchantStore.SeedDemo(ctx); err != nil {
			_ = a.close(ctx)
			return nil, fmt.Errorf("seed demo merchants: %w", err)
		}
	}

	providerURL := cfg.ProviderURL
	if providerURL == "" {
		// No provider configured: run the mock in-process on a loopback
		// port, sending its webhooks to this very API.
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		running, err := provider.StartInProcess(ctx, provider.Config{
			WebhookURL:    "http://" + net.JoinHostPort("127.0.0.1", port) + "/v1/webhooks/provider",
			WebhookSecret: cfg.ProviderWebhookSecret,
			// Real providers send their events a while after the call; a
			// webhook that always beat the API's own timeout would hide the
			// 202-and-reconcile path that lost responses take.
			WebhookDelay: cfg.ProviderWebhookDelay,
			Logger:       log.With("component", "provider"),
		})
		if err != nil {
			_ = a.close(ctx)
			return nil, fmt.Errorf("start in-process provider: %w", err)
		}
		a.provider = running
		providerURL = running.URL
		log.Info("in-process payment provider started", "url", providerURL)
	}
	providerClient := provider.NewClient(providerURL, provider.ClientOptions{Timeout: cfg.ProviderTimeout})

	clock := idempotency.SystemClock{}
	cipher, err := responseCipher(cfg, log)
	if err != nil {
		_ = a.close(ctx)
		return nil, err
	}
	var storeOpts []idempotency.StoreOption
	if cipher != nil {
		storeOpts = append(storeOpts, idempotency.WithCipher(cipher))
	}
	idemStore := idempotency.NewGormStore(db.DB, storeOpts...)
	// Every layer reports to one registry through the hooks it offers;
	// records is the store as the keeper and the janitor use it, its
	// failures counted.
	m := metrics.New()
	records := m.InstrumentStore(idemStore, string(db.Dialect))
	idemCfg := idempotency.Config{
		TTL:          cfg.IdempotencyTTL,
		LockTimeout:  cfg.IdempotencyLockTimeout,
		Wait:         cfg.IdempotencyWait,
		MaxBodyBytes: cfg.MaxBodyBytes,
		Observer:     m.IdempotencyObserver(),
	}
	var redisPinger handlers.Pinger
	var publisher outbox.Publisher = outbox.LogPublisher{Log: log.With("component", "outbox")}
	if cfg.RedisURL != "" {
		// Redis accelerates (replays, wake-ups, the shared rate limit);
		// PostgreSQL stays the truth, so Redis being down at start is no
		// reason to refuse to start.
		client, err := redisconn.Open(cfg.RedisURL, redisconn.Options{Timeout: cfg.RedisTimeout})
		if err != nil {
			_ = a.close(ctx)
			return nil, err
		}
		cache := idempotency.NewRedisCache(client, log.With("component", "redis"))
		if cipher != nil {
			cache.WithCipher(cipher)
		}
		a.closers = append(a.closers, func() error { cache.Close(); return client.Close() })
		idemCfg.Cache = cache
		redisPinger = cache
		publisher = outbox.RedisStreamPublisher{Client: client}
		if cfg.RateLimitNewKeys > 0 {
			idemCfg.Limiter = idempotency.NewRedisLimiter(client, cfg.RateLimitNewKeys, cfg.RateLimitWindow)
		}
	}
	keeper := idempotency.NewKeeper(records, db.DB, clock, idemCfg, handlers.MerchantID, handlers.RenderError, log)

	store := payments.NewGormStore(db.DB)
	opts = append([]payments.Option{
		payments.WithPayments(store, m.InstrumentProvider(paymentsport.New(providerClient))),
		payments.WithResolved(handlers.NewRecordFinisher(keeper, log)),
		payments.WithEvents(store),
	}, opts...)
	service := payments.NewService(store, time.Now, opts...)
	m.WatchDatabase(idemStore, store, 2*time.Second)
	if sqlDB, err := db.DB.DB(); err == nil {
		m.WatchPool(sqlDB)
	}

	secret := cfg.ProviderWebhookSecret
	router := handlers.NewRouter(handlers.Deps{
		Log:               log,
		Orders:            service,
		Payments:          service,
		Auth:              merchantStore,
		IdempotentAtomic:  ordersGuard(keeper, log),
		IdempotentGuarded: keeper.Guarded(),
		VerifyWebhook: func(header string, body []byte) error {
			return provider.VerifySignature(secret, header, body, time.Now(), 5*time.Minute)
		},
		MaxBodyBytes: cfg.MaxBodyBytes,
		Database:     db,
		Redis:        redisPinger,

		IdempotencyKeys: keeper,
		HashKey:         handlers.NewKeyHasher([]byte(cfg.LogKeySecret)),
		Middleware:      []gin.HandlerFunc{m.HTTPMiddleware()},
	})
	handlers.RegisterSwagger(router)
	router.GET("/metrics", gin.WrapH(m.Handler()))
	a.handler = router

	janitor := idempotency.NewJanitor(records, clock, idempotency.JanitorConfig{Interval: cfg.JanitorInterval}, log)
	janitor.OnPurge = m.Purged
	reconciler := payments.NewReconciler(service, payments.ReconcilerConfig{
		Interval:   cfg.ReconcileInterval,
		PendingAge: cfg.IdempotencyLockTimeout,
		OnResult:   m.Reconciled,
		Open:       handlers.NewOpenRecords(idemStore),
	}, log)
	dispatcher := outbox.NewDispatcher(db.DB, publisher, cfg.OutboxInterval, log.With("component", "outbox"))
	a.workers = []func(context.Context){janitor.Run, reconciler.Run, dispatcher.Run}
	return a, nil
}

// close releases what newApp opened.
func (a *app) close(ctx context.Context) error {
	var errs []error
	if a.provider != nil {
		errs = append(errs, a.provider.Shutdown(ctx))
	}
	for _, c := range a.closers {
		errs = append(errs, c())
	}
	errs = append(errs, a.db.Close())
	return errors.Join(errs...)
}

func serve(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	a, err := newApp(ctx, cfg, log, ln)
	if err != nil {
		_ = ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

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

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "dialect", string(a.db.Dialect))

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
