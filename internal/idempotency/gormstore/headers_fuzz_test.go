package gormstore

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeHeaders reads the stored headers column: anything unreadable is
// errBadHeaders, and what encodeHeaders writes reads back as it was.
func FuzzDecodeHeaders(f *testing.F) {
	f.Fuzz(func(t *testing.T, stored, contentType, location string) {
		if _, _, err := decodeHeaders(stored); err != nil && !errors.Is(err, errBadHeaders) {
			t.Fatalf("error %v does not wrap errBadHeaders", err)
		}
		ct, loc, err := decodeHeaders(encodeHeaders(contentType, location))
		if err != nil {
			t.Fatalf("own encoding does not decode: %v", err)
		}
		if utf8.ValidString(contentType) && utf8.ValidString(location) && (ct != contentType || loc != location) {
			t.Fatalf("round trip: %q %q -> %q %q", contentType, location, ct, loc)
		}
	})
}
