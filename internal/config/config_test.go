package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/config"
)

func TestDefaultsAreTheContracts(t *testing.T) {
	cfg, err := config.Load(nil)
	require.NoError(t, err)
	require.Equal(t, ":8080", cfg.HTTPAddr)
	require.Empty(t, cfg.DatabaseURL)
	require.Empty(t, cfg.RedisURL)
	require.Empty(t, cfg.ProviderURL)
	require.Equal(t, 5*time.Second, cfg.ProviderTimeout)
	require.Equal(t, 24*time.Hour, cfg.IdempotencyTTL)
	require.Equal(t, 30*time.Second, cfg.IdempotencyLockTimeout)
	require.Equal(t, 2*time.Second, cfg.IdempotencyWait)
	require.Equal(t, 5*time.Second, cfg.ReconcileInterval)
	require.Equal(t, 15*time.Minute, cfg.PendingCancelAfter)
	require.True(t, cfg.DemoSeed)
	require.Equal(t, "whsec_test", cfg.ProviderWebhookSecret)
	require.EqualValues(t, 1048576, cfg.MaxBodyBytes)
	require.Equal(t, config.OutboxSinkRedis, cfg.OutboxSink)
	require.Equal(t, "nats://127.0.0.1:4222", cfg.NATSURL)
	require.Equal(t, config.AppEnvDevelopment, cfg.AppEnv)
	require.False(t, cfg.Production())
	require.Equal(t, 168*time.Hour, cfg.EventRetention)
	require.Equal(t, 100, cfg.RateLimitNewKeys, "the new-key limit is on by default")
	require.Equal(t, time.Second, cfg.RateLimitWindow)
}

// goodProduction is the least a production deployment sets.
var goodProduction = []string{
	"APP_ENV=production",
	"PROVIDER_WEBHOOK_SECRET=" + goodWebhookSecret,
	"LOG_KEY_SECRET=" + goodLogKeySecret,
	"PROVIDER_KEY_SECRET=" + goodProviderKeySecret,
}

// Secrets as operators make them (a PSP's whsec_ secret, openssl rand
// -hex 32, openssl rand -base64 32), made once for these tests.
const (
	goodWebhookSecret     = "whsec_atJNNovBlj2HCUrjxBG1j2j4J6h/jmPs"
	goodLogKeySecret      = "f529c8c6f56d350cfa60122cf7c636ee11a9cd4ffcfadeb2c69c2a4ebfe2c43a"
	goodProviderKeySecret = "/GqTsuEkvOAexHSsNklNmLFvFMe+U4hmHugHIGtiZ48="
)

// TestProductionRefusesEachBadSettingByName: each setting that only a
// development machine may use stops production at start, naming the
// setting and never repeating a secret.
func TestProductionRefusesEachBadSettingByName(t *testing.T) {
	webhook, logSecret, keySecret := goodProduction[1], goodProduction[2], goodProduction[3]
	cases := map[string]struct {
		env  []string
		want string
	}{
		"demo seed":                 {[]string{webhook, logSecret, keySecret, "DEMO_SEED=true"}, "DEMO_SEED must be false in production"},
		"default webhook secret":    {[]string{logSecret, keySecret}, "PROVIDER_WEBHOOK_SECRET must be set in production"},
		"test webhook secret":       {[]string{logSecret, keySecret, "PROVIDER_WEBHOOK_SECRET=whsec_test"}, "PROVIDER_WEBHOOK_SECRET must be set in production"},
		"short webhook secret":      {[]string{logSecret, keySecret, "PROVIDER_WEBHOOK_SECRET=" + strings.Repeat("s", 31)}, "PROVIDER_WEBHOOK_SECRET must be at least 32 bytes in production"},
		"no log key secret":         {[]string{webhook, keySecret}, "LOG_KEY_SECRET must be set in production"},
		"no provider key secret":    {[]string{webhook, logSecret}, "PROVIDER_KEY_SECRET must be set in production"},
		"short provider key secret": {[]string{webhook, logSecret, "PROVIDER_KEY_SECRET=" + strings.Repeat("s", 31)}, "PROVIDER_KEY_SECRET must be empty (development only) or at least 32 characters"},
		"unknown environment":       {[]string{"APP_ENV=staging"}, `APP_ENV must be development or production, got "staging"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(append([]string{"APP_ENV=production"}, tc.env...))
			require.ErrorContains(t, err, tc.want)
			for _, secret := range []string{strings.Repeat("s", 31), goodWebhookSecret, goodLogKeySecret, goodProviderKeySecret} {
				require.NotContains(t, err.Error(), secret)
			}
		})
	}
	// All at once: every refusal is named in one go.
	_, err := config.Load([]string{"APP_ENV=production", "DEMO_SEED=true"})
	for _, name := range []string{"DEMO_SEED", "PROVIDER_WEBHOOK_SECRET", "LOG_KEY_SECRET", "PROVIDER_KEY_SECRET"} {
		require.ErrorContains(t, err, name)
	}
}

// TestProductionStartsWithGoodSettings: production needs nothing beyond
// its two secrets; the demo seed is off unless asked for, and the
// in-process provider, SQLite and no Redis stay allowed.
func TestProductionStartsWithGoodSettings(t *testing.T) {
	cfg, err := config.Load(goodProduction)
	require.NoError(t, err)
	require.True(t, cfg.Production())
	require.False(t, cfg.DemoSeed, "production does not seed the demo merchants by default")
	require.Empty(t, cfg.ProviderURL)
	require.Empty(t, cfg.DatabaseURL)
	require.Empty(t, cfg.RedisURL)

	cfg, err = config.Load(append(append([]string{}, goodProduction...), "DEMO_SEED=false"))
	require.NoError(t, err)
	require.False(t, cfg.DemoSeed)

	// Development allows what production refuses.
	cfg, err = config.Load([]string{"APP_ENV=development", "DEMO_SEED=true"})
	require.NoError(t, err)
	require.True(t, cfg.DemoSeed)
}

func TestBadSettingsAreNamed(t *testing.T) {
	cases := map[string]string{
		"IDEMPOTENCY_WAIT=soon":                  "IDEMPOTENCY_WAIT",
		"IDEMPOTENCY_TTL=-1s":                    "IDEMPOTENCY_TTL",
		"DATABASE_URL=mysql://x":                 "DATABASE_URL",
		"REDIS_URL=localhost:6379":               "REDIS_URL",
		"PROVIDER_URL=provider:8081":             "PROVIDER_URL",
		"MAX_BODY_BYTES=0":                       "MAX_BODY_BYTES",
		"DEMO_SEED=maybe":                        "DEMO_SEED",
		"IDEMPOTENCY_LOCK_TIMEOUT=0s":            "IDEMPOTENCY_LOCK_TIMEOUT",
		"HTTP_READ_TIMEOUT=0s":                   "HTTP_READ_TIMEOUT",
		"HTTP_IDLE_TIMEOUT=-1s":                  "HTTP_IDLE_TIMEOUT",
		"HTTP_WRITE_TIMEOUT=6s":                  "HTTP_WRITE_TIMEOUT (6s) must exceed PROVIDER_TIMEOUT + IDEMPOTENCY_WAIT (7s)",
		"PROVIDER_TIMEOUT=30s":                   "PROVIDER_TIMEOUT (30s) must be below IDEMPOTENCY_LOCK_TIMEOUT (30s)",
		"PENDING_CANCEL_AFTER=30s":               "PENDING_CANCEL_AFTER (30s) must exceed IDEMPOTENCY_LOCK_TIMEOUT (30s)",
		"PENDING_CANCEL_AFTER=never":             "PENDING_CANCEL_AFTER",
		"OUTBOX_SINK=kafka":                      "OUTBOX_SINK must be redis",
		"OUTBOX_SINK=NATS":                       "OUTBOX_SINK must be redis",
		"NATS_URL=127.0.0.1:4222":                "NATS_URL must be nats://host:port",
		"TRUSTED_PROXIES=10.0.0.0/8,proxy.local": "TRUSTED_PROXIES must be IP addresses or CIDRs",
		"NATS_URL=http://nats:4222":              "NATS_URL must be nats://host:port",
		"NATS_URL=nats://a:1,b:2":                "NATS_URL must be nats://host:port",
		"NATS_URL=nats:///stream":                "NATS_URL must be nats://host:port",
		"EVENT_RETENTION=0s":                     "EVENT_RETENTION",
		"EVENT_RETENTION=a week":                 "EVENT_RETENTION",
		"RATE_LIMIT_NEW_KEYS=-1":                 "RATE_LIMIT_NEW_KEYS",
		"RATE_LIMIT_WINDOW=0s":                   "RATE_LIMIT_WINDOW",
		"LOG_FORMAT=yaml":                        "LOG_FORMAT must be json or text",
		"METRICS_MAX_CONNS=0":                    "METRICS_MAX_CONNS must be positive",
		"MAX_CONNS_IPV6_PREFIX=16":               "MAX_CONNS_IPV6_PREFIX must be between 32 and 128",
		"MAX_CONNS_IPV6_PREFIX=129":              "MAX_CONNS_IPV6_PREFIX must be between 32 and 128",
		// Migrations over a direct URL are for PostgreSQL only.
		"MIGRATE_DATABASE_URL=postgres://db:5432/payments": "MIGRATE_DATABASE_URL",
		"MIGRATE_DATABASE_URL=sqlite:data/x.db":            "MIGRATE_DATABASE_URL",
	}
	for kv, name := range cases {
		t.Run(kv, func(t *testing.T) {
			_, err := config.Load([]string{kv})
			require.ErrorContains(t, err, name)
		})
	}
}

// TestTimeoutsFitTheLongestRequest: a write timeout that fits the provider
// timeout and the wait starts; the defaults do.
func TestTimeoutsFitTheLongestRequest(t *testing.T) {
	cfg, err := config.Load(nil)
	require.NoError(t, err)
	require.Greater(t, cfg.HTTPWriteTimeout, cfg.ProviderTimeout+cfg.IdempotencyWait)
	require.Less(t, cfg.ProviderTimeout, cfg.IdempotencyLockTimeout)
	_, err = config.Load([]string{"PROVIDER_TIMEOUT=20s", "HTTP_WRITE_TIMEOUT=23s", "IDEMPOTENCY_LOCK_TIMEOUT=1m"})
	require.NoError(t, err)
}

func TestOutboxSinkSettings(t *testing.T) {
	for _, env := range [][]string{
		{"OUTBOX_SINK=nats"},
		{"OUTBOX_SINK=nats", "NATS_URL=nats://n1:4222,nats://n2:4222"},
		{"OUTBOX_SINK=nats", "NATS_URL=tls://user:secret@nats.internal:4222"},
		{"OUTBOX_SINK=redis", "REDIS_URL=redis://127.0.0.1:6379/0"},
	} {
		cfg, err := config.Load(env)
		require.NoError(t, err, env)
		require.Contains(t, []string{config.OutboxSinkRedis, config.OutboxSinkNATS}, cfg.OutboxSink)
	}
	_, err := config.Load([]string{"NATS_URL=tls://user:secret@nats.internal"})
	require.NoError(t, err)
	_, err = config.Load([]string{"NATS_URL=ftp://user:secret@nats.internal"})
	require.ErrorContains(t, err, "NATS_URL")
	require.NotContains(t, err.Error(), "secret", "no credentials in the message")
}

// TestLogFormat: people read development's log, machines production's,
// unless LOG_FORMAT says otherwise.
func TestLogFormat(t *testing.T) {
	cases := []struct {
		env  []string
		text bool
	}{
		{nil, true},
		{[]string{"LOG_FORMAT=json"}, false},
		{goodProduction, false},
		{append([]string{"LOG_FORMAT=text"}, goodProduction...), true},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.env, " "), func(t *testing.T) {
			cfg, err := config.Load(c.env)
			require.NoError(t, err)
			require.Equal(t, c.text, cfg.LogText())
		})
	}
}

// TestDatabaseURLs: DATABASE_URL may name several hosts (a primary and its
// standbys) with pgx's parameters, and MIGRATE_DATABASE_URL a direct way to
// the server beside a pooled DATABASE_URL; neither is repeated in an error.
func TestDatabaseURLs(t *testing.T) {
	pooled := "DATABASE_URL=postgres://app:pw@pgbouncer1:6432,pgbouncer2:6432/payments?target_session_attrs=read-write&default_query_exec_mode=exec"
	direct := "MIGRATE_DATABASE_URL=postgresql://app:pw@db1:5432,db2:5432/payments?target_session_attrs=read-write"
	cfg, err := config.Load([]string{pooled, direct})
	require.NoError(t, err)
	require.Equal(t, strings.TrimPrefix(pooled, "DATABASE_URL="), cfg.DatabaseURL)
	require.Equal(t, strings.TrimPrefix(direct, "MIGRATE_DATABASE_URL="), cfg.MigrateDatabaseURL)

	_, err = config.Load([]string{"DATABASE_URL=sqlite:data/x.db", "MIGRATE_DATABASE_URL=postgres://app:secretpw@db1/payments"})
	require.ErrorContains(t, err, "MIGRATE_DATABASE_URL")
	require.NotContains(t, err.Error(), "secretpw")
}
