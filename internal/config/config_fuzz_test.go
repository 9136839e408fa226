package config

import (
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the configuration parsers. Seed corpora are in
// testdata/fuzz/<FuzzName>.

// FuzzResponseKeys parses RESPONSE_ENCRYPTION_KEYS and
// RESPONSE_ENCRYPTION_KEY_ID. What it accepts is a set of 32-byte keys under
// valid ids with the active one among them; what it refuses, it refuses
// without quoting key material, since the error is printed at start.
func FuzzResponseKeys(f *testing.F) {
	f.Fuzz(func(t *testing.T, keys, activeID string) {
		c := Config{ResponseEncryptionKeys: keys, ResponseEncryptionKeyID: activeID}
		got, active, err := c.ResponseKeys()
		if err != nil {
			if got != nil || active != "" {
				t.Fatalf("an error with a result: %v %q", got, active)
			}
			shown := activeID
			for entry := range strings.SplitSeq(keys, ",") {
				id, _, _ := strings.Cut(strings.TrimSpace(entry), ":")
				shown += "\x00" + id
			}
			for entry := range strings.SplitSeq(keys, ",") {
				entry = strings.TrimSpace(entry)
				secret := entry
				if _, after, ok := strings.Cut(entry, ":"); ok {
					secret = after
				}
				if len(secret) >= 12 && !strings.Contains(shown, secret) && strings.Contains(err.Error(), secret) {
					t.Fatalf("the error quotes key material %q: %v", secret, err)
				}
			}
			return
		}
		if strings.TrimSpace(keys) == "" {
			if got != nil || active != "" {
				t.Fatalf("no keys, yet %v %q", got, active)
			}
			return
		}
		if _, ok := got[active]; !ok {
			t.Fatalf("active key %q is not among %v", active, got)
		}
		if activeID != "" && active != activeID {
			t.Fatalf("active %q, asked for %q", active, activeID)
		}
		for id, key := range got {
			if err := validKeyID(id); err != nil {
				t.Fatalf("accepted id: %v", err)
			}
			if len(key) != ResponseKeySize {
				t.Fatalf("key %q is %d bytes", id, len(key))
			}
		}
	})
}

// FuzzLoad feeds arbitrary values to the settings that are parsed (numbers,
// durations, booleans, URLs, levels). It never panics; a configuration it
// accepts obeys every documented rule; a refusal names the setting and
// never repeats the database or Redis URL, which may hold a password.
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, ttl, maxBody, databaseURL, redisURL, logLevel, rateLimit, demoSeed string) {
		environ := []string{
			"IDEMPOTENCY_TTL=" + ttl,
			"MAX_BODY_BYTES=" + maxBody,
			"DATABASE_URL=" + databaseURL,
			"REDIS_URL=" + redisURL,
			"LOG_LEVEL=" + logLevel,
			"RATE_LIMIT_NEW_KEYS=" + rateLimit,
			"DEMO_SEED=" + demoSeed,
		}
		cfg, err := Load(environ)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "configuration: ") {
				t.Fatalf("unlabelled error: %v", err)
			}
			others := strings.Join([]string{ttl, maxBody, logLevel, rateLimit, demoSeed}, "\x00")
			for _, u := range []string{databaseURL, redisURL} {
				if len(u) >= 12 && !strings.Contains(others, u) && strings.Contains(err.Error(), u) {
					t.Fatalf("the error repeats a URL: %v", err)
				}
			}
			return
		}
		switch {
		case cfg.IdempotencyTTL <= 0:
			t.Fatalf("IDEMPOTENCY_TTL %s accepted", cfg.IdempotencyTTL)
		case cfg.MaxBodyBytes <= 0:
			t.Fatalf("MAX_BODY_BYTES %d accepted", cfg.MaxBodyBytes)
		case cfg.RateLimitNewKeys < 0:
			t.Fatalf("RATE_LIMIT_NEW_KEYS %d accepted", cfg.RateLimitNewKeys)
		case cfg.DatabaseURL != "" && !strings.HasPrefix(cfg.DatabaseURL, "postgres://") &&
			!strings.HasPrefix(cfg.DatabaseURL, "postgresql://") && !strings.HasPrefix(cfg.DatabaseURL, "sqlite:"):
			t.Fatalf("DATABASE_URL %q accepted", cfg.DatabaseURL)
		case cfg.RedisURL != "" && !strings.HasPrefix(cfg.RedisURL, "redis://") && !strings.HasPrefix(cfg.RedisURL, "rediss://"):
			t.Fatalf("REDIS_URL %q accepted", cfg.RedisURL)
		}
		switch strings.ToLower(cfg.LogLevel) {
		case "debug", "info", "warn", "error":
		default:
			t.Fatalf("LOG_LEVEL %q accepted", cfg.LogLevel)
		}
		if ttl != "" {
			if d, err := time.ParseDuration(ttl); err != nil || d != cfg.IdempotencyTTL {
				t.Fatalf("IDEMPOTENCY_TTL %q read as %s", ttl, cfg.IdempotencyTTL)
			}
		}
	})
}

// FuzzWeakSecret holds the rule of production secrets to what its callers
// rely on: it answers every input (the secret comes from the environment,
// any bytes), it never quotes a secret it judged in its reason, since the
// reason is printed at start, and what it accepts is long enough and holds
// no whitespace.
func FuzzWeakSecret(f *testing.F) {
	for _, seed := range []string{
		"", "whsec_test", "0123456789abcdef0123456789abcdeg", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
		"3f1c9a0be57d24e8c6b1f09a7d3e5c2b", "q3Yx8Kp2Lm9Tz4Wv7Nb1Rc6Hs0Jd5Fg+Ue/AoXiEk8=", "\xff\xfe" + strings.Repeat("\x80", 40),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		why := WeakSecret(v)
		if len(v) >= MinSecretLength && strings.Contains(why, v) {
			t.Fatalf("the reason quotes the secret: %s", why)
		}
		if why == "" && (len(v) < MinSecretLength || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f })) {
			t.Fatalf("accepted %q", v)
		}
	})
}
