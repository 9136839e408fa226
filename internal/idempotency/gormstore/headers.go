package gormstore

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/go-json-experiment/json/jsontext"
)

// A stored answer's headers are one JSON object, a value per name:
// {"Content-Type": "application/json", "Location": "/v1/orders/ord_1",
// "Etag": "\"1\""}. The Keeper has already kept only the headers that
// describe the result (idempotency.Config.StoredHeaders), never
// Authorization, cookies or anything else a request or answer carried.
// Records written before held only Content-Type and Location in the same
// object, so they read unchanged, and an older instance reading a newer row
// ignores the names it does not know.

func encodeHeaders(h http.Header) string {
	// Names sorted: the same headers, the same text. Written by hand rather
	// than through a map and encoding/json, which cost a dozen allocations
	// on every stored answer; jsontext.AppendQuote escapes as JSON requires.
	var names [8]string
	sorted := names[:0]
	for name := range h {
		sorted = append(sorted, name)
	}
	slices.Sort(sorted)
	b := make([]byte, 0, 128)
	b = append(b, '{')
	for i, name := range sorted {
		if i > 0 {
			b = append(b, ',')
		}
		b, _ = jsontext.AppendQuote(b, name)
		b = append(b, ':')
		// Invalid UTF-8 is written as U+FFFD, as encoding/json did.
		b, _ = jsontext.AppendQuote(b, h.Get(name))
	}
	b = append(b, '}')
	return string(b)
}

func decodeHeaders(s string) (http.Header, error) {
	var flat map[string]string
	if err := json.Unmarshal([]byte(s), &flat); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadHeaders, err)
	}
	h := make(http.Header, len(flat))
	for name, v := range flat {
		h.Set(name, v)
	}
	return h, nil
}
