package idempotency

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// Fuzz targets for what the idempotency layer reads back from storage: the
// encrypted response envelope and the stored headers, and for the
// fingerprint's framing. Seed corpora are in testdata/fuzz/<FuzzName>.

// FuzzFingerprint checks the framing of the fingerprint: it is a SHA-256 in
// hex, the order of path parameters does not matter, and moving a byte from
// one part to the next (which a plain concatenation would not notice)
// changes it.
func FuzzFingerprint(f *testing.F) {
	f.Fuzz(func(t *testing.T, method, route, name, value string, body []byte) {
		params := []Param{{Name: name, Value: value}, {Name: "id", Value: "ord_1"}}
		fp := Fingerprint(method, route, params, body)
		if raw, err := hex.DecodeString(fp); err != nil || len(raw) != 32 {
			t.Fatalf("not a hex SHA-256: %q", fp)
		}
		if name != "id" {
			if other := Fingerprint(method, route, []Param{params[1], params[0]}, body); other != fp {
				t.Fatalf("parameter order changed the fingerprint")
			}
		}
		if route != "" {
			if Fingerprint(method+route[:1], route[1:], params, body) == fp {
				t.Fatalf("method/route boundary not framed: %q %q", method, route)
			}
		}
		if value != "" {
			shifted := []Param{{Name: name + value[:1], Value: value[1:]}, params[1]}
			if Fingerprint(method, route, shifted, body) == fp {
				t.Fatalf("name/value boundary not framed: %q %q", name, value)
			}
		}
		if Fingerprint(method, route, params, append(bytes.Clone(body), ' ')) == fp {
			t.Fatalf("the body is not covered")
		}
	})
}
