package seal

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzResponseCipherOpen feeds arbitrary envelopes to the decrypter: it
// never panics, refuses with ErrKeyUnknown or
// ErrUndecryptable only, and never opens what it did not seal.
// Whatever it seals for a record opens for that record alone.
func FuzzResponseCipherOpen(f *testing.F) {
	c, err := New(map[string][]byte{
		"k1": bytes.Repeat([]byte{1}, KeySize),
		"k2": bytes.Repeat([]byte{2}, KeySize),
	}, "k2")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, merchantID, key, keyID string, envelope []byte) {
		body, err := c.Open(merchantID, key, keyID, envelope)
		switch {
		case err == nil:
			t.Fatalf("opened an envelope it never sealed: %q -> %q", envelope, body)
		case errors.Is(err, ErrKeyUnknown):
			if keyID == "k1" || keyID == "k2" {
				t.Fatalf("key %q is held: %v", keyID, err)
			}
		case !errors.Is(err, ErrUndecryptable):
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
		if _, err := c.Open(merchantID+"x", key, id, sealed); !errors.Is(err, ErrUndecryptable) {
			t.Fatalf("opened under another merchant: %v", err)
		}
		if _, err := c.Open(merchantID, key+"x", id, sealed); !errors.Is(err, ErrUndecryptable) {
			t.Fatalf("opened under another key: %v", err)
		}
		flipped := bytes.Clone(sealed)
		flipped[len(flipped)-1] ^= 1
		if _, err := c.Open(merchantID, key, id, flipped); !errors.Is(err, ErrUndecryptable) {
			t.Fatalf("opened a tampered envelope: %v", err)
		}
	})
}
