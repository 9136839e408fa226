package redisconn

import (
	"strings"
	"testing"
)

// FuzzOpen parses REDIS_URL without connecting. It never panics; a refusal
// is labelled REDIS_URL and never quotes the password, since the error is
// printed at start; what it accepts gives a client that closes. The seed
// corpus is in testdata/fuzz/FuzzOpen.
func FuzzOpen(f *testing.F) {
	const password = "pw-Zq81vX7t"
	f.Fuzz(func(t *testing.T, rest string) {
		for _, rawURL := range []string{rest, "redis://user:" + password + "@" + rest} {
			client, err := Open(rawURL, Options{})
			if err != nil {
				if !strings.HasPrefix(err.Error(), "REDIS_URL") {
					t.Fatalf("unlabelled error: %v", err)
				}
				if strings.Contains(err.Error(), password) && !strings.Contains(rest, password) {
					t.Fatalf("the error quotes the password: %v", err)
				}
				continue
			}
			if client == nil {
				t.Fatalf("no client and no error for %q", rawURL)
			}
			_ = client.Close()
		}
	})
}
