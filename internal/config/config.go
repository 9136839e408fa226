// Package config reads the API's settings from the environment, with the
// contract's defaults, and refuses a bad value at start with a message that
// names the setting.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/idemkeys/payments/internal/tracing"
)

// Config is every setting of cmd/api.
type Config struct {
	// AppEnv is development (the default: the demo merchants and the test
	// webhook secret are allowed) or production (they are refused; see
	// validateProduction).
	AppEnv                  string        `env:"APP_ENV" envDefault:"development"`
	HTTPAddr                string        `env:"HTTP_ADDR" envDefault:":8080"`
	HTTPReadHeaderTimeout   time.Duration `env:"HTTP_READ_HEADER_TIMEOUT" envDefault:"5s"`
	HTTPReadTimeout         time.Duration `env:"HTTP_READ_TIMEOUT" envDefault:"15s"`
	HTTPWriteTimeout        time.Duration `env:"HTTP_WRITE_TIMEOUT" envDefault:"30s"`
	HTTPIdleTimeout         time.Duration `env:"HTTP_IDLE_TIMEOUT" envDefault:"60s"`
	DatabaseURL             string        `env:"DATABASE_URL"`
	MigrateDatabaseURL      string        `env:"MIGRATE_DATABASE_URL"`
	SQLitePath              string        `env:"SQLITE_PATH" envDefault:"data/payments.db"`
	RedisURL                string        `env:"REDIS_URL"`
	RedisTimeout            time.Duration `env:"REDIS_TIMEOUT" envDefault:"200ms"`
	RateLimitNewKeys        int           `env:"RATE_LIMIT_NEW_KEYS" envDefault:"100"`
	RateLimitWindow         time.Duration `env:"RATE_LIMIT_WINDOW" envDefault:"1s"`
	OutboxInterval          time.Duration `env:"OUTBOX_INTERVAL" envDefault:"200ms"`
	OutboxSink              string        `env:"OUTBOX_SINK" envDefault:"redis"`
	NATSURL                 string        `env:"NATS_URL" envDefault:"nats://127.0.0.1:4222"`
	ProviderURL             string        `env:"PROVIDER_URL"`
	ProviderTimeout         time.Duration `env:"PROVIDER_TIMEOUT" envDefault:"5s"`
	IdempotencyTTL          time.Duration `env:"IDEMPOTENCY_TTL" envDefault:"24h"`
	IdempotencyLockTimeout  time.Duration `env:"IDEMPOTENCY_LOCK_TIMEOUT" envDefault:"30s"`
	IdempotencyWait         time.Duration `env:"IDEMPOTENCY_WAIT" envDefault:"2s"`
	IdempotencyTombstones   bool          `env:"IDEMPOTENCY_TOMBSTONES" envDefault:"false"`
	IdempotencyTombstoneTTL time.Duration `env:"IDEMPOTENCY_TOMBSTONE_TTL" envDefault:"720h"`
	ReconcileInterval       time.Duration `env:"RECONCILE_INTERVAL" envDefault:"5s"`
	PendingCancelAfter      time.Duration `env:"PENDING_CANCEL_AFTER" envDefault:"15m"`
	DemoSeed                bool          `env:"DEMO_SEED" envDefault:"true"`
	ProviderWebhookSecret   string        `env:"PROVIDER_WEBHOOK_SECRET" envDefault:"whsec_test"`
	ProviderWebhookDelay    time.Duration `env:"PROVIDER_WEBHOOK_DELAY" envDefault:"10s"`
	MaxBodyBytes            int64         `env:"MAX_BODY_BYTES" envDefault:"1048576"`
	// MetricsAddr is production's admin listener: /metrics and the health
	// probes, off the API's port (development serves them on the API's).
	MetricsAddr string `env:"METRICS_ADDR" envDefault:"127.0.0.1:9091"`
	// MetricsMaxConns bounds the admin listener's connections, all
	// clients together: a scraper and the probes need a few.
	MetricsMaxConns   int           `env:"METRICS_MAX_CONNS" envDefault:"16"`
	UnknownKeyBudget  int           `env:"UNKNOWN_KEY_BUDGET" envDefault:"100"`
	UnknownKeyWindow  time.Duration `env:"UNKNOWN_KEY_WINDOW" envDefault:"10s"`
	MaxHeaderBytes    int           `env:"MAX_HEADER_BYTES" envDefault:"32768"`
	MaxConns          int           `env:"MAX_CONNS" envDefault:"4096"`
	MaxConnsPerClient int           `env:"MAX_CONNS_PER_CLIENT" envDefault:"256"`
	// MaxConnsIPv6Prefix is how many leading bits of an IPv6 address
	// MAX_CONNS_PER_CLIENT counts as one client: a host commonly has a
	// whole /64 to itself.
	MaxConnsIPv6Prefix int `env:"MAX_CONNS_IPV6_PREFIX" envDefault:"64"`
	// TrustedProxies are the addresses (IPs or CIDRs) whose
	// X-Forwarded-For names the client: the address the unknown-key
	// budget counts by. Empty: none; the client is the TCP peer.
	TrustedProxies  []string      `env:"TRUSTED_PROXIES" envSeparator:","`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"10s"`
	DBMaxConns      int           `env:"DB_MAX_CONNS" envDefault:"20"`
	// DBLockTimeout bounds a statement's wait for a row lock (PostgreSQL's
	// lock_timeout), and DBIdleInTransactionTimeout how long PostgreSQL
	// keeps the transaction of a client gone quiet (a frozen instance)
	// before it ends the session and frees its locks. Zero leaves the
	// server's or the role's value (behind PgBouncer, which refuses them
	// as start-up settings).
	// Unset, DBLockTimeout is 5s, or IDEMPOTENCY_WAIT + 3s when that is
	// longer (Load), so that it always outlasts the wait.
	DBLockTimeout              time.Duration `env:"DB_LOCK_TIMEOUT"`
	DBIdleInTransactionTimeout time.Duration `env:"DB_IDLE_IN_TRANSACTION_TIMEOUT" envDefault:"10s"`
	// MaxWritesPerResource bounds the writes to one order or payment at
	// work at once on an instance: the next waits for a turn (up to
	// DB_LOCK_TIMEOUT) holding no database connection, so requests queued
	// on one hot row cannot drain the pool.
	MaxWritesPerResource int           `env:"MAX_WRITES_PER_RESOURCE" envDefault:"4"`
	DBConnectTimeout     time.Duration `env:"DB_CONNECT_TIMEOUT" envDefault:"30s"`
	JanitorInterval      time.Duration `env:"JANITOR_INTERVAL" envDefault:"1m"`
	EventRetention       time.Duration `env:"EVENT_RETENTION" envDefault:"168h"`
	LogLevel             string        `env:"LOG_LEVEL" envDefault:"info"`
	// LogFormat is json (lines for machines) or text (lines for people);
	// empty: text in development, json in production (LogText).
	LogFormat string `env:"LOG_FORMAT"`

	// Secrets (secrets.go); no error message or log line ever shows them.
	LogKeySecret      string `env:"LOG_KEY_SECRET"`
	ProviderKeySecret string `env:"PROVIDER_KEY_SECRET"`
	// ProviderKeySecretPrevious is the PROVIDER_KEY_SECRET a rotation
	// replaced, while operations it derived may still be retried (at
	// least IDEMPOTENCY_TTL); empty when no rotation is under way.
	ProviderKeySecretPrevious string `env:"PROVIDER_KEY_SECRET_PREVIOUS"`
	ResponseEncryptionKeys    string `env:"RESPONSE_ENCRYPTION_KEYS"`
	ResponseEncryptionKeyID   string `env:"RESPONSE_ENCRYPTION_KEY_ID"`

	// Tracing is what the standard OTEL_* variables say (tracing.FromEnv,
	// shared with cmd/provider): on with an OTLP endpoint, off otherwise.
	Tracing tracing.Settings
}

// Load parses the settings from environ (KEY=value pairs, as os.Environ
// returns them) and checks them.
func Load(environ []string) (Config, error) {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	var cfg Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: vars}); err != nil {
		return Config{}, fmt.Errorf("configuration: %w", nameSettings(err))
	}
	if vars["DB_LOCK_TIMEOUT"] == "" {
		cfg.DBLockTimeout = max(5*time.Second, cfg.IdempotencyWait+3*time.Second)
	}
	if vars["DEMO_SEED"] == "" && cfg.AppEnv == AppEnvProduction {
		// The demo merchants' keys are public: a production deployment
		// never seeds them unless asked, and then refuses (validateProduction).
		cfg.DemoSeed = false
	}
	tr, trErr := tracing.FromEnv(func(k string) string { return vars[k] })
	cfg.Tracing = tr
	if err := errors.Join(cfg.validate(), trErr); err != nil {
		return Config{}, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

// validate checks every setting and returns all that are wrong, joined.
func (c Config) validate() error {
	errs := c.validateTimeouts()
	errs = append(errs, c.validatePlaces()...)
	errs = append(errs, c.validateLimits()...)
	if c.ProviderWebhookSecret == "" {
		errs = append(errs, errors.New("PROVIDER_WEBHOOK_SECRET must not be empty"))
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL must be debug, info, warn or error, got %q", c.LogLevel))
	}
	switch c.LogFormat {
	case "", LogFormatJSON, LogFormatText:
	default:
		errs = append(errs, fmt.Errorf("LOG_FORMAT must be json or text, got %q", c.LogFormat))
	}
	errs = append(errs, c.validateSecrets()...)
	return errors.Join(errs...)
}

// positiveTo returns a check that a duration setting is positive, adding
// its error to errs.
func positiveTo(errs *[]error) func(name string, d time.Duration) {
	return func(name string, d time.Duration) {
		if d <= 0 {
			*errs = append(*errs, fmt.Errorf("%s must be a positive duration, got %s", name, d))
		}
	}
}

// validateTimeouts checks the timeouts and intervals that the idempotency
// layer and the provider calls depend on, and how they must order.
func (c Config) validateTimeouts() []error {
	var errs []error
	positive := positiveTo(&errs)
	positive("PROVIDER_TIMEOUT", c.ProviderTimeout)
	positive("HTTP_READ_HEADER_TIMEOUT", c.HTTPReadHeaderTimeout)
	positive("HTTP_READ_TIMEOUT", c.HTTPReadTimeout)
	positive("HTTP_WRITE_TIMEOUT", c.HTTPWriteTimeout)
	positive("HTTP_IDLE_TIMEOUT", c.HTTPIdleTimeout)
	// The longest legitimate request is a duplicate that waits for its
	// original (IDEMPOTENCY_WAIT) and then, if the original gave the key
	// back, makes the provider call itself (PROVIDER_TIMEOUT): the server
	// must not cut the answer short before that.
	if longest := c.ProviderTimeout + c.IdempotencyWait; c.HTTPWriteTimeout <= longest {
		errs = append(errs, fmt.Errorf("HTTP_WRITE_TIMEOUT (%s) must exceed PROVIDER_TIMEOUT + IDEMPOTENCY_WAIT (%s): a payment may take that long", c.HTTPWriteTimeout, longest))
	}
	// A request still waiting for the provider must keep its lock: a retry
	// that took the record over meanwhile would call the provider again
	// while the first call is still open.
	if c.ProviderTimeout >= c.IdempotencyLockTimeout {
		errs = append(errs, fmt.Errorf("PROVIDER_TIMEOUT (%s) must be below IDEMPOTENCY_LOCK_TIMEOUT (%s): a request still waiting for the provider must keep its lock", c.ProviderTimeout, c.IdempotencyLockTimeout))
	}
	// A cancel takes the key's record over; a request still holding its
	// lock must not be that old, or its attempt could race the cancel.
	if c.PendingCancelAfter <= c.IdempotencyLockTimeout {
		errs = append(errs, fmt.Errorf("PENDING_CANCEL_AFTER (%s) must exceed IDEMPOTENCY_LOCK_TIMEOUT (%s): an attempt is canceled only when no request can still hold its key", c.PendingCancelAfter, c.IdempotencyLockTimeout))
	}
	positive("IDEMPOTENCY_TTL", c.IdempotencyTTL)
	positive("IDEMPOTENCY_LOCK_TIMEOUT", c.IdempotencyLockTimeout)
	positive("IDEMPOTENCY_WAIT", c.IdempotencyWait)
	positive("IDEMPOTENCY_TOMBSTONE_TTL", c.IdempotencyTombstoneTTL)
	positive("RECONCILE_INTERVAL", c.ReconcileInterval)
	positive("SHUTDOWN_TIMEOUT", c.ShutdownTimeout)
	positive("DB_CONNECT_TIMEOUT", c.DBConnectTimeout)
	positive("JANITOR_INTERVAL", c.JanitorInterval)
	positive("EVENT_RETENTION", c.EventRetention)
	return errs
}

// validatePlaces checks where the program runs and what it connects to:
// the environment, its addresses and the stores' URLs.
func (c Config) validatePlaces() []error {
	var errs []error
	switch c.AppEnv {
	case AppEnvDevelopment:
	case AppEnvProduction:
		errs = append(errs, c.validateProduction()...)
	default:
		errs = append(errs, fmt.Errorf("APP_ENV must be development or production, got %q", c.AppEnv))
	}
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("HTTP_ADDR must not be empty"))
	}
	if c.Production() && (c.MetricsAddr == "" || c.MetricsAddr == c.HTTPAddr) {
		errs = append(errs, errors.New("METRICS_ADDR must be set in production, and differ from HTTP_ADDR: /metrics shows every merchant's figures (default 127.0.0.1:9091)"))
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") &&
		!strings.HasPrefix(c.DatabaseURL, "postgresql://") && !strings.HasPrefix(c.DatabaseURL, "sqlite:") {
		errs = append(errs, errors.New("DATABASE_URL must be empty (embedded SQLite), postgres://... or sqlite:<path>"))
	}
	if c.MigrateDatabaseURL != "" && (!isPostgresURL(c.MigrateDatabaseURL) || !isPostgresURL(c.DatabaseURL)) {
		errs = append(errs, errors.New("MIGRATE_DATABASE_URL must be empty (migrate over DATABASE_URL) or postgres://..., and only with a postgres:// DATABASE_URL"))
	}
	if c.RedisURL != "" && !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://") {
		errs = append(errs, errors.New("REDIS_URL must be empty or start with redis:// or rediss://"))
	}
	switch c.OutboxSink {
	case OutboxSinkRedis, OutboxSinkNATS:
	default:
		errs = append(errs, fmt.Errorf("OUTBOX_SINK must be redis (the stream outbox:events, or the log without REDIS_URL) or nats (JetStream at NATS_URL), got %q", c.OutboxSink))
	}
	if err := validateNATSURL(c.NATSURL); err != nil {
		errs = append(errs, err)
	}
	if c.ProviderURL != "" && !strings.HasPrefix(c.ProviderURL, "http://") && !strings.HasPrefix(c.ProviderURL, "https://") {
		errs = append(errs, errors.New("PROVIDER_URL must be empty (in-process provider) or an http(s):// URL"))
	}
	return errs
}

// validateLimits checks Redis's timeout, the new-key quota's window, the
// outbox's interval, and the limits on clients, bodies, connections and
// the database's waits.
func (c Config) validateLimits() []error {
	var errs []error
	positive := positiveTo(&errs)
	positive("REDIS_TIMEOUT", c.RedisTimeout)
	positive("RATE_LIMIT_WINDOW", c.RateLimitWindow)
	positive("OUTBOX_INTERVAL", c.OutboxInterval)
	if c.RateLimitNewKeys < 0 {
		errs = append(errs, fmt.Errorf("RATE_LIMIT_NEW_KEYS must be 0 (off) or positive, got %d", c.RateLimitNewKeys))
	}
	if c.ProviderWebhookDelay < 0 {
		errs = append(errs, fmt.Errorf("PROVIDER_WEBHOOK_DELAY must not be negative, got %s", c.ProviderWebhookDelay))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, fmt.Errorf("MAX_BODY_BYTES must be positive, got %d", c.MaxBodyBytes))
	}
	if c.MaxHeaderBytes < 4096 || c.MaxHeaderBytes > 1<<20 {
		errs = append(errs, fmt.Errorf("MAX_HEADER_BYTES must be between 4096 and 1048576, got %d", c.MaxHeaderBytes))
	}
	for _, p := range c.TrustedProxies {
		p = strings.TrimSpace(p)
		if _, _, err := net.ParseCIDR(p); err != nil && net.ParseIP(p) == nil {
			errs = append(errs, fmt.Errorf("TRUSTED_PROXIES must be IP addresses or CIDRs separated by commas, got %q", p))
		}
	}
	if c.UnknownKeyBudget < 0 {
		errs = append(errs, fmt.Errorf("UNKNOWN_KEY_BUDGET must be 0 (off) or positive, got %d", c.UnknownKeyBudget))
	}
	positive("UNKNOWN_KEY_WINDOW", c.UnknownKeyWindow)
	if c.MaxConns <= 0 {
		errs = append(errs, fmt.Errorf("MAX_CONNS must be positive, got %d", c.MaxConns))
	}
	if c.MaxConnsPerClient <= 0 || c.MaxConnsPerClient > c.MaxConns {
		errs = append(errs, fmt.Errorf("MAX_CONNS_PER_CLIENT must be positive and at most MAX_CONNS (%d), got %d", c.MaxConns, c.MaxConnsPerClient))
	}
	if c.MetricsMaxConns <= 0 {
		errs = append(errs, fmt.Errorf("METRICS_MAX_CONNS must be positive, got %d", c.MetricsMaxConns))
	}
	if c.MaxConnsIPv6Prefix < 32 || c.MaxConnsIPv6Prefix > 128 {
		errs = append(errs, fmt.Errorf("MAX_CONNS_IPV6_PREFIX must be between 32 and 128 (bits of an IPv6 address that name one client), got %d", c.MaxConnsIPv6Prefix))
	}
	if c.DBMaxConns <= 0 {
		errs = append(errs, fmt.Errorf("DB_MAX_CONNS must be positive, got %d", c.DBMaxConns))
	}
	// A duplicate waits for its original up to IDEMPOTENCY_WAIT, and the
	// original may be waiting on a row meanwhile: the row's wait must
	// outlast the duplicate's, so that the duplicate gets its 409 (or the
	// answer) rather than the original a 503.
	if c.DBLockTimeout < 0 || (c.DBLockTimeout > 0 && c.DBLockTimeout <= c.IdempotencyWait) {
		errs = append(errs, fmt.Errorf("DB_LOCK_TIMEOUT must be 0 (the server's or role's) or exceed IDEMPOTENCY_WAIT (%s), got %s", c.IdempotencyWait, c.DBLockTimeout))
	}
	if c.DBIdleInTransactionTimeout < 0 || (c.DBIdleInTransactionTimeout > 0 && c.DBIdleInTransactionTimeout < time.Second) {
		errs = append(errs, fmt.Errorf("DB_IDLE_IN_TRANSACTION_TIMEOUT must be 0 (the server's or role's) or at least 1s, got %s", c.DBIdleInTransactionTimeout))
	}
	if c.MaxWritesPerResource < 0 {
		errs = append(errs, fmt.Errorf("MAX_WRITES_PER_RESOURCE must be 0 (no bound) or positive, got %d", c.MaxWritesPerResource))
	}
	return errs
}

// isPostgresURL reports whether u names a PostgreSQL server (one or several
// hosts: pgx reads the URL).
func isPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// Values of APP_ENV.
const (
	AppEnvDevelopment = "development"
	AppEnvProduction  = "production"
)

// Production refuses what only a development machine may use.
const (
	// DemoWebhookSecret is the well-known test secret of the mock provider.
	DemoWebhookSecret = "whsec_test"
	// MinProductionWebhookSecret is the shortest webhook secret production
	// accepts, in bytes: 256 bits, as long as the HMAC-SHA256 it keys.
	MinProductionWebhookSecret = 32
)

// Production reports whether APP_ENV is production.
func (c Config) Production() bool { return c.AppEnv == AppEnvProduction }

// Values of LOG_FORMAT.
const (
	LogFormatJSON = "json"
	LogFormatText = "text"
)

// LogText reports whether the log is written for people: LOG_FORMAT=text,
// or no LOG_FORMAT in development. Production's default stays JSON, which
// log collectors parse.
func (c Config) LogText() bool {
	return c.LogFormat == LogFormatText || c.LogFormat == "" && !c.Production()
}

// validateProduction lists what production refuses, each by its setting,
// and nothing else: the in-process provider, SQLite and no Redis all stay
// allowed (a single small deployment is still a deployment).
func (c Config) validateProduction() []error {
	var errs []error
	if c.DemoSeed {
		errs = append(errs, errors.New("DEMO_SEED must be false in production (APP_ENV=production): the demo merchants' API keys are public"))
	}
	switch {
	case c.ProviderWebhookSecret == DemoWebhookSecret:
		errs = append(errs, errors.New("PROVIDER_WEBHOOK_SECRET must be set in production (APP_ENV=production): the default is the well-known test secret"))
	case len(c.ProviderWebhookSecret) < MinProductionWebhookSecret:
		errs = append(errs, fmt.Errorf("PROVIDER_WEBHOOK_SECRET must be at least %d bytes in production (APP_ENV=production), got %d (e.g. openssl rand -hex 32)", MinProductionWebhookSecret, len(c.ProviderWebhookSecret)))
	}
	errs = append(errs, c.weakSecrets()...)
	if c.LogKeySecret == "" {
		errs = append(errs, fmt.Errorf("LOG_KEY_SECRET must be set in production (APP_ENV=production): every instance keys log hashes and Redis key names with it (at least %d characters, e.g. openssl rand -hex 32)", minLogKeySecret))
	}
	if c.ProviderKeySecret == "" {
		errs = append(errs, fmt.Errorf("PROVIDER_KEY_SECRET must be set in production (APP_ENV=production): every instance derives payment ids and provider keys with it, and the development one is public (at least %d characters, e.g. openssl rand -hex 32; never change it on a running deployment)", minProviderKeySecret))
	}
	return errs
}

// Values of OUTBOX_SINK.
const (
	OutboxSinkRedis = "redis"
	OutboxSinkNATS  = "nats"
)

// validateNATSURL accepts what nats.go dials: one URL, or several separated
// by commas (a cluster's seed servers), each nats://, tls://, ws:// or
// wss:// with a host.
func validateNATSURL(v string) error {
	if v == "" {
		return errors.New("NATS_URL must not be empty (default nats://127.0.0.1:4222)")
	}
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		u, err := url.Parse(part)
		if err != nil || u.Host == "" || u.Path != "" && u.Path != "/" {
			return errors.New("NATS_URL must be nats://host:port (or tls://, ws://, wss://), several separated by commas")
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("NATS_URL must be nats://host:port (or tls://, ws://, wss://), got scheme %q", u.Scheme)
		}
	}
	return nil
}

// nameSettings rewrites the library's parse errors, which name the Go field,
// to name the environment variable the operator actually set.
func nameSettings(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	t := reflect.TypeFor[Config]()
	errs := make([]error, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := t.FieldByName(pe.Name); ok {
				errs = append(errs, fmt.Errorf("%s: %w", f.Tag.Get("env"), pe.Err))
				continue
			}
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}
