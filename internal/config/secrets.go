package config

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/idemkeys/payments/internal/idempotency"
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
// LOG_KEY_SECRET, PROVIDER_KEY_SECRET), as the configuration reference
// states it in one sentence: at least MinSecretLength bytes, no whitespace
// or control character, not a value this project publishes, not matching a
// copy of itself moved along by up to half its length in more than two
// thirds of the places where the two overlap, and no more than a third of
// its characters in runs of MinRunLength or more that step through the
// alphabet, the digits or a row of a US keyboard (either direction, any
// case).
//
// The rule looks for the structure people put into secrets they make by
// hand, not for randomness: a measure of randomness from the secret's own
// characters cannot tell 32 random hex characters (exactly 128 bits, from
// a 16-letter alphabet) from a guessable string, and refused the former
// while passing the alphabet in order. zxcvbn does no better here: its Go
// ports score 32 random hex characters between 76 and 118 bits
// (ccojocar/zxcvbn-go v1.0.4) or 90 and 107 (trustelem/zxcvbn v1.0.1),
// under the 128 they hold, and the development key secret at 71 to 76, so
// no threshold of theirs passes every random one with a margin while
// refusing it. Random output stays far from both limits: over a million
// samples each of openssl rand -hex 16, -hex 32 and -base64 32, the closest
// any came was 50% matching a moved copy and 31% in runs; over 20 million
// of -hex 16, 59% (9 of 16, 9 of 17 and 11 of 21 places, 8 of them above
// half, where an earlier limit of one half refused them: one secret in 2.3
// million by the binomial tails of every shift at 1/16, and one run of
// TestRandomSecretsPass in 230). Two thirds is passed by chance about once
// in 5 billion, while a word repeated with a quarter of it changed
// ("secretABsecretCD...": 18 of 24 places) is still refused.
const (
	MinSecretLength = 32
	MinRunLength    = 4
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
	if slices.Contains(publishedSecrets, v) {
		return "it is a development default this project publishes"
	}
	folded := foldCase(v)
	if shift, same, overlap := closestShift(folded); 3*same > 2*overlap {
		return fmt.Sprintf("it repeats itself: moved along by %d characters it matches in %d of %d places", shift, same, overlap)
	}
	if n := inRuns(folded); 3*n > len(v) {
		return fmt.Sprintf("%d of its %d characters are runs of the alphabet, the digits or a keyboard row", n, len(v))
	}
	return ""
}

// publishedSecrets are the development defaults anyone can read in this
// repository: set by hand in production, they would be no secret.
var publishedSecrets = []string{DemoWebhookSecret, idempotency.DevelopmentKeySecret, developmentRedisKeyLabel}

// foldCase lowers ASCII letters byte by byte, so that positions stay those
// of v (strings.ToLower may change the length of other text).
func foldCase(v string) []byte {
	b := []byte(v)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

// closestShift finds the distance, up to half of v's length, at which v
// best matches itself moved along, and returns it with the places that
// match and the places compared. A repeated string matches everywhere; one
// with a few characters changed, nearly everywhere; random characters, in
// about one place in their alphabet's size. The cost grows with the square
// of the length, which is nothing at start for any secret a person sets (a
// 4 KiB one takes a few milliseconds).
func closestShift(v []byte) (shift, same, overlap int) {
	best := -1.0
	for d := 1; d <= len(v)/2; d++ {
		n := 0
		for i := d; i < len(v); i++ {
			if v[i] == v[i-d] {
				n++
			}
		}
		if r := float64(n) / float64(len(v)-d); r > best {
			best, shift, same, overlap = r, d, n, len(v)-d
		}
	}
	return shift, same, overlap
}

// runSequences are the orders a run steps through, lower case: the
// alphabet, the digits, and the rows of a US keyboard, unshifted and
// shifted (shifted letters are upper case, which foldCase lowers).
var runSequences = []string{
	"abcdefghijklmnopqrstuvwxyz", "0123456789",
	"`1234567890-=", "~!@#$%^&*()_+",
	"qwertyuiop[]\\", "asdfghjkl;'", "zxcvbnm,./",
	"qwertyuiop{}|", "asdfghjkl:\"", "zxcvbnm<>?",
}

// inRuns counts v's characters that lie in a run: MinRunLength or more
// characters in a row, each the next (or each the previous) of the one
// before in one of runSequences.
func inRuns(v []byte) int {
	in := make([]bool, len(v))
	for _, seq := range runSequences {
		var pos [256]int // position in seq plus one; 0: not in seq
		for i := 0; i < len(seq); i++ {
			pos[seq[i]] = i + 1
		}
		for _, dir := range []int{1, -1} {
			length := 1
			for i := 1; i < len(v); i++ {
				if p, q := pos[v[i-1]], pos[v[i]]; p != 0 && q != 0 && q == p+dir {
					length++
				} else {
					length = 1
				}
				if length >= MinRunLength {
					for j := i - length + 1; j <= i; j++ {
						in[j] = true
					}
				}
			}
		}
	}
	n := 0
	for _, b := range in {
		if b {
			n++
		}
	}
	return n
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
