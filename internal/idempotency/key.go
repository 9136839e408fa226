package idempotency

import "fmt"

// MaxKeyLength is the longest Idempotency-Key accepted.
const MaxKeyLength = 255

// KeyPattern is ValidateKey's rule as a regular expression (ECMA-262 and Go
// syntax alike), for the OpenAPI document's Idempotency-Key parameters.
const KeyPattern = `^[\x21-\x7E]{1,255}$`

// ValidateKey checks a key's shape: 1 to 255 characters of visible ASCII
// (no header injection, nothing that logs or compares oddly). It returns
// nil or an error wrapping ErrKeyInvalid.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: the key is empty", ErrKeyInvalid)
	}
	if len(key) > MaxKeyLength {
		return fmt.Errorf("%w: the key is longer than %d characters", ErrKeyInvalid, MaxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: character %d is outside visible ASCII (0x21-0x7E)", ErrKeyInvalid, i+1)
		}
	}
	return nil
}
