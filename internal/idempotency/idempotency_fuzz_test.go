package idempotency

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// Fuzz targets of the fingerprint's framing, the canonical JSON and the key
// rule. Seed corpora are in testdata/fuzz/<FuzzName>.

// FuzzFingerprint checks the framing of the fingerprint: it is a SHA-256 in
// hex (the order of path parameters cannot matter: they come as a map), and
// moving a byte from one part to the next (which a plain concatenation would
// not notice) changes it.
func FuzzFingerprint(f *testing.F) {
	f.Fuzz(func(t *testing.T, method, route, name, value string, body []byte) {
		if name == "id" {
			return // the route's own parameter below
		}
		params := map[string]string{name: value, "id": "ord_1"}
		fp := fingerprint(method, route, params, body)
		if raw, err := hex.DecodeString(fp); err != nil || len(raw) != 32 {
			t.Fatalf("not a hex SHA-256: %q", fp)
		}
		if route != "" {
			if fingerprint(method+route[:1], route[1:], params, body) == fp {
				t.Fatalf("method/route boundary not framed: %q %q", method, route)
			}
		}
		if value != "" && name+value[:1] != "id" {
			shifted := map[string]string{name + value[:1]: value[1:], "id": "ord_1"}
			if fingerprint(method, route, shifted, body) == fp {
				t.Fatalf("name/value boundary not framed: %q %q", name, value)
			}
		}
		if fingerprint(method, route, params, append(bytes.Clone(body), ' ')) == fp {
			t.Fatalf("the body is not covered")
		}
	})
}
