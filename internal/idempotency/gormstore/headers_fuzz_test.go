package gormstore

import (
	"errors"
	"net/http"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
)

// FuzzDecodeHeaders reads the stored headers column: anything unreadable is
// errBadHeaders, and what encodeHeaders writes reads back as it was.
func FuzzDecodeHeaders(f *testing.F) {
	f.Add(`{"Content-Type":"application/json","Location":"/v1/orders/ord_1"}`, "application/json", `"1"`)
	f.Fuzz(func(t *testing.T, stored, contentType, etag string) {
		if _, err := decodeHeaders(stored); err != nil && !errors.Is(err, errBadHeaders) {
			t.Fatalf("error %v does not wrap errBadHeaders", err)
		}
		in := http.Header{}
		in.Set("Content-Type", contentType)
		in.Set("ETag", etag)
		out, err := decodeHeaders(encodeHeaders(in))
		if err != nil {
			t.Fatalf("own encoding does not decode: %v", err)
		}
		// Values a handler can send (valid field values, in UTF-8: the
		// column is JSON text) come back as they went.
		valid := func(v string) bool { return httpguts.ValidHeaderFieldValue(v) && utf8.ValidString(v) }
		if valid(contentType) && valid(etag) &&
			(out.Get("Content-Type") != contentType || out.Get("Etag") != etag) {
			t.Fatalf("round trip: %q %q -> %v", contentType, etag, out)
		}
	})
}
