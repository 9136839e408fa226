package config

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
)

// ResponseKeySize is the size of a response encryption key (AES-256).
const ResponseKeySize = 32

// minLogKeySecret is the shortest LOG_KEY_SECRET accepted: a short secret
// would let whoever reads the logs guess keys from their hashes.
const minLogKeySecret = 16

// ResponseKeys decodes RESPONSE_ENCRYPTION_KEYS, a comma-separated list of
// id:base64 entries (each key 32 random bytes, standard or URL base64), and
// returns it with the active key id, RESPONSE_ENCRYPTION_KEY_ID (which may
// be left out when there is only one key). keys is nil when encryption is
// off (RESPONSE_ENCRYPTION_KEYS empty). Load has already checked both
// settings, so the error only matters for a Config built by hand.
func (c Config) ResponseKeys() (keys map[string][]byte, activeID string, err error) {
	raw := strings.TrimSpace(c.ResponseEncryptionKeys)
	if raw == "" {
		if c.ResponseEncryptionKeyID != "" {
			return nil, "", errors.New("RESPONSE_ENCRYPTION_KEY_ID is set but RESPONSE_ENCRYPTION_KEYS is empty")
		}
		return nil, "", nil
	}
	keys = map[string][]byte{}
	var ids []string
	for i, entry := range strings.Split(raw, ",") {
		id, encoded, ok := strings.Cut(strings.TrimSpace(entry), ":")
		if !ok {
			// The entry itself is not shown: it may be a bare key.
			return nil, "", fmt.Errorf("RESPONSE_ENCRYPTION_KEYS: entry %d is not id:base64-key", i+1)
		}
		if err := validKeyID(id); err != nil {
			return nil, "", fmt.Errorf("RESPONSE_ENCRYPTION_KEYS: entry %d: %w", i+1, err)
		}
		if _, dup := keys[id]; dup {
			return nil, "", fmt.Errorf("RESPONSE_ENCRYPTION_KEYS: key id %q appears twice", id)
		}
		key, err := decodeKey(encoded)
		if err != nil {
			return nil, "", fmt.Errorf("RESPONSE_ENCRYPTION_KEYS: key %q is not base64", id)
		}
		if len(key) != ResponseKeySize {
			return nil, "", fmt.Errorf("RESPONSE_ENCRYPTION_KEYS: key %q is %d bytes, want %d (AES-256; e.g. openssl rand -base64 32)", id, len(key), ResponseKeySize)
		}
		keys[id] = key
		ids = append(ids, id)
	}
	activeID = c.ResponseEncryptionKeyID
	switch {
	case activeID == "" && len(ids) == 1:
		activeID = ids[0]
	case activeID == "":
		return nil, "", fmt.Errorf("RESPONSE_ENCRYPTION_KEY_ID must name the active key among %v", ids)
	}
	if _, ok := keys[activeID]; !ok {
		return nil, "", fmt.Errorf("RESPONSE_ENCRYPTION_KEY_ID %q is not among the keys of RESPONSE_ENCRYPTION_KEYS %v", activeID, ids)
	}
	return keys, activeID, nil
}

func (c Config) validateSecrets() []error {
	var errs []error
	if _, _, err := c.ResponseKeys(); err != nil {
		errs = append(errs, err)
	}
	if c.LogKeySecret != "" && len(c.LogKeySecret) < minLogKeySecret {
		errs = append(errs, fmt.Errorf("LOG_KEY_SECRET must be empty (development only) or at least %d characters", minLogKeySecret))
	}
	if c.ProviderKeySecret != "" && len(c.ProviderKeySecret) < minProviderKeySecret {
		errs = append(errs, fmt.Errorf("PROVIDER_KEY_SECRET must be empty (development only) or at least %d characters", minProviderKeySecret))
	}
	return errs
}

// minProviderKeySecret is the shortest PROVIDER_KEY_SECRET accepted: it
// keys the HMAC-SHA256 that derives payment ids and provider keys
// (internal/idempotency/derive.go), so 32 characters of openssl rand -hex.
const minProviderKeySecret = 32

// developmentRedisKeyLabel keys the Redis names in development without
// LOG_KEY_SECRET: a public constant, so that every development instance
// still shares one cache (a random per-process secret would split it), at
// the price of names that anyone reading that Redis can recompute.
// Production requires LOG_KEY_SECRET, so it never uses this.
const developmentRedisKeyLabel = "idemkeys development: LOG_KEY_SECRET unset"

// RedisKeySecret is the secret of the keyed hash that names idempotency
// keys in Redis (entries and wake-up messages). It is derived from
// LOG_KEY_SECRET, which every instance shares, as HMAC-SHA256(LOG_KEY_SECRET,
// "redis key names"), so that a log line's key hash and a Redis name of the
// same key are unrelated. Without LOG_KEY_SECRET (development only) it is
// derived from a public constant instead.
func (c Config) RedisKeySecret() []byte {
	base := c.LogKeySecret
	if base == "" {
		base = developmentRedisKeyLabel
	}
	mac := hmac.New(sha256.New, []byte(base))
	mac.Write([]byte("redis key names"))
	return mac.Sum(nil)
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// validKeyID: ids are stored on every record and shown in errors, so they
// are short and plain.
func validKeyID(id string) error {
	if id == "" || len(id) > 32 {
		return fmt.Errorf("key id %q must be 1 to 32 characters", id)
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return fmt.Errorf("key id %q may hold only letters, digits, '-', '_' and '.'", id)
		}
	}
	return nil
}

// The rule every production secret meets (PROVIDER_WEBHOOK_SECRET,
// LOG_KEY_SECRET, PROVIDER_KEY_SECRET): at least MinSecretLength
// characters, no whitespace or control character anywhere, not one shorter
// string repeated, and at least MinSecretBits bits of entropy as its own
// characters measure it (its length times the Shannon entropy of their
// frequencies). `openssl rand -hex 32` (never under 200 bits by this
// measure), `openssl rand -base64 32` (180) and a PSP's whsec_ secret of 24
// or more random bytes in base64 (150) pass; a padded, repeated or
// word-like secret does not.
const (
	MinSecretLength = 32
	MinSecretBits   = 128
)

// WeakSecret says why v fails the rule of production secrets, or "" when
// it meets it. The reason never quotes the secret.
func WeakSecret(v string) string {
	if len(v) < MinSecretLength {
		return fmt.Sprintf("shorter than %d characters", MinSecretLength)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c == 0x7f {
			return "it holds whitespace or control characters (padded?)"
		}
	}
	for period := 1; period <= len(v)/2; period++ {
		if repeats(v, period) {
			return fmt.Sprintf("it repeats a %d-character string", period)
		}
	}
	if bits := entropyBits(v); bits < MinSecretBits {
		return fmt.Sprintf("about %.0f bits of entropy, under %d", bits, MinSecretBits)
	}
	return ""
}

// repeats reports whether v is its first period characters over and over
// (the last copy may be cut short).
func repeats(v string, period int) bool {
	for i := period; i < len(v); i++ {
		if v[i] != v[i-period] {
			return false
		}
	}
	return true
}

// entropyBits is len(v) times the Shannon entropy of v's byte
// frequencies: what v's own characters say about its randomness.
func entropyBits(v string) float64 {
	var counts [256]int
	for i := 0; i < len(v); i++ {
		counts[v[i]]++
	}
	n := float64(len(v))
	var h float64
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h * n
}

// weakSecrets applies the rule of production secrets to each secret that
// is set (validateProduction reports an unset one on its own).
func (c Config) weakSecrets() []error {
	var errs []error
	for _, s := range []struct{ name, value string }{
		{"PROVIDER_WEBHOOK_SECRET", c.ProviderWebhookSecret},
		{"LOG_KEY_SECRET", c.LogKeySecret},
		{"PROVIDER_KEY_SECRET", c.ProviderKeySecret},
	} {
		if s.value == "" || s.value == DemoWebhookSecret ||
			s.name == "PROVIDER_WEBHOOK_SECRET" && len(s.value) < MinProductionWebhookSecret {
			continue // reported as unset, the test secret or short
		}
		if why := WeakSecret(s.value); why != "" {
			errs = append(errs, fmt.Errorf("%s is too weak for production (APP_ENV=production): %s; make one with openssl rand -hex 32 (see the configuration reference)", s.name, why))
		}
	}
	return errs
}
