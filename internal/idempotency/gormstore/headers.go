package gormstore

import (
	"encoding/json"
	"fmt"
	"net/http"
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
	flat := make(map[string]string, len(h))
	for name := range h {
		flat[name] = h.Get(name)
	}
	// A map's keys are written sorted: the same headers, the same text.
	b, _ := json.Marshal(flat)
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
