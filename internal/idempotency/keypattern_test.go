package idempotency

import (
	"regexp"
	"strings"
	"testing"
)

// TestKeyPatternAgreesWithValidateKey: the pattern the OpenAPI document
// states for Idempotency-Key accepts exactly the keys ValidateKey accepts.
func TestKeyPatternAgreesWithValidateKey(t *testing.T) {
	re := regexp.MustCompile(KeyPattern)
	keys := []string{
		"", "a", "k-1", "3f1c2a9e-8d47-4b1f-9a53-0c6e2d7b8a41", "a/b?c#d%e", "!", "~", "\"quoted\"",
		"with space", "tab\there", "new\nline", "\x7f", "\x20", "é", "ключ",
		strings.Repeat("k", 255), strings.Repeat("k", 256),
	}
	for c := 0; c < 256; c++ {
		keys = append(keys, string([]byte{byte(c)}))
	}
	for _, k := range keys {
		valid := ValidateKey(k) == nil
		if matched := re.MatchString(k); matched != valid {
			t.Errorf("key %q: pattern matches %v, ValidateKey accepts %v", k, matched, valid)
		}
	}
}
