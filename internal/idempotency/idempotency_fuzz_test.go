package idempotency

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// Fuzz targets for what the idempotency layer reads back from storage: the
// encrypted response envelope and the stored headers, and for the
// fingerprint's framing. Seed corpora are in testdata/fuzz/<FuzzName>.

// FuzzResponseCipherOpen feeds arbitrary envelopes to the decrypter: it
// never panics, refuses with ErrResponseKeyUnknown or
// ErrResponseUndecryptable only, and never opens what it did not seal.
// Whatever it seals for a record opens for that record alone.
func FuzzResponseCipherOpen(f *testing.F) {
	c, err := NewResponseCipher(map[string][]byte{
		"k1": bytes.Repeat([]byte{1}, ResponseKeySize),
		"k2": bytes.Repeat([]byte{2}, ResponseKeySize),
	}, "k2")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, merchantID, key, keyID string, envelope []byte) {
		body, err := c.Open(merchantID, key, keyID, envelope)
		switch {
		case err == nil:
			t.Fatalf("opened an envelope it never sealed: %q -> %q", envelope, body)
		case errors.Is(err, ErrResponseKeyUnknown):
			if keyID == "k1" || keyID == "k2" {
				t.Fatalf("key %q is held: %v", keyID, err)
			}
		case !errors.Is(err, ErrResponseUndecryptable):
			t.Fatalf("unexpected error: %v", err)
		}

		id, sealed, err := c.Seal(merchantID, key, envelope)
		if err != nil || id != "k2" {
			t.Fatalf("seal: %q %v", id, err)
		}
		if bytes.Contains(sealed, envelope) && len(envelope) > 16 {
			t.Fatalf("the sealed envelope shows the body")
		}
		got, err := c.Open(merchantID, key, id, sealed)
		if err != nil || !bytes.Equal(got, envelope) {
			t.Fatalf("round trip: %q -> %q (%v)", envelope, got, err)
		}
		// Bound to its record: the same bytes under another merchant or key,
		// or with one bit flipped, do not open.
		if _, err := c.Open(merchantID+"x", key, id, sealed); !errors.Is(err, ErrResponseUndecryptable) {
			t.Fatalf("opened under another merchant: %v", err)
		}
		if _, err := c.Open(merchantID, key+"x", id, sealed); !errors.Is(err, ErrResponseUndecryptable) {
			t.Fatalf("opened under another key: %v", err)
		}
		flipped := bytes.Clone(sealed)
		flipped[len(flipped)-1] ^= 1
		if _, err := c.Open(merchantID, key, id, flipped); !errors.Is(err, ErrResponseUndecryptable) {
			t.Fatalf("opened a tampered envelope: %v", err)
		}
	})
}

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
