package gormstore

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

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
	if h, ok := decodePlainHeaders(s); ok {
		return h, nil
	}
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

// decodePlainHeaders reads the text encodeHeaders writes when no name or
// value holds a byte outside printable ASCII, which is what every answer of
// the API stores: {"Content-Type":"application/json","Etag":"\"1\"",
// "Location":"/v1/orders/ord_1"}. It keeps the names and values as
// substrings of s where it can, all the values in one slice, where
// encoding/json costs a map, a string per name and value and a slice per
// header: about twenty allocations on each record read from the database.
// Anything else (whitespace, a byte outside printable ASCII, a name twice)
// is not ok, and encoding/json reads it.
func decodePlainHeaders(s string) (http.Header, bool) {
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, false
	}
	// At most one header more than there are commas.
	n := strings.Count(s, ",") + 1
	h := make(http.Header, n)
	values := make([]string, 0, n)
	for i := 1; i < len(s)-1; {
		if len(h) > 0 {
			if s[i] != ',' {
				return nil, false
			}
			i++
		}
		name, next, ok := plainString(s, i)
		if !ok || next >= len(s) || s[next] != ':' {
			return nil, false
		}
		value, next, ok := plainString(s, next+1)
		if !ok {
			return nil, false
		}
		i = next
		key := textproto.CanonicalMIMEHeaderKey(name)
		if _, twice := h[key]; twice {
			return nil, false
		}
		// Each header's own cap-1 slice of values: an Add on one
		// header cannot write over the next one's value.
		values = append(values, value)
		h[key] = values[len(values)-1 : len(values) : len(values)]
	}
	return h, true
}

// plainString reads the JSON string that starts at s[i] when it holds
// printable ASCII only; next is the index after its closing quote. Its
// value is its text, a substring of s, unless it holds an escape (the
// quotes of an entity tag).
func plainString(s string, i int) (value string, next int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	escaped := false
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			if !escaped {
				return s[i+1 : j], j + 1, true
			}
			var buf [64]byte
			b, err := jsontext.AppendUnquote(buf[:0], s[i:j+1])
			if err != nil {
				return "", 0, false
			}
			return string(b), j + 1, true
		case c == '\\':
			// The escaped byte is skipped: it may be a quote.
			escaped = true
			j++
		case c < 0x20 || c > 0x7e:
			return "", 0, false
		}
	}
	return "", 0, false
}
