package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Canonicalize returns body as canonical JSON (RFC 8785, JCS): members sorted,
// no insignificant whitespace, numbers and strings in one spelling. An empty
// body canonicalizes to "{}" so that "no body" and "empty object" are one
// request. It returns an error wrapping ErrMalformedBody for invalid JSON and
// for an object that repeats a member name.
func Canonicalize(body []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return []byte("{}"), nil
	}
	if !utf8.Valid(trimmed) {
		// I-JSON (RFC 7493), which JCS builds on, is UTF-8 only; invalid
		// bytes would otherwise be fingerprinted as they come.
		return nil, fmt.Errorf("%w: the body is not valid UTF-8", ErrMalformedBody)
	}
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("%w: the body is not valid JSON", ErrMalformedBody)
	}
	out, err := jcs.Transform(trimmed)
	if err != nil {
		// The input is valid JSON, so what JCS still refuses is a repeated
		// member name (or a number outside IEEE 754 double range).
		reason := "the body cannot be canonicalized"
		if strings.Contains(err.Error(), "Duplicate key") {
			reason = "the body repeats a member name"
		}
		return nil, fmt.Errorf("%w: %s", ErrMalformedBody, reason)
	}
	return out, nil
}

// Param is one path parameter of a route.
type Param struct {
	Name, Value string
}

// Fingerprint identifies a request for one key: method, route template, path
// parameters (sorted by name) and the canonical body. Two requests with the
// same fingerprint are the same logical request.
func Fingerprint(method, route string, params []Param, canonicalBody []byte) string {
	sorted := make([]Param, len(params))
	copy(sorted, params)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	h := sha256.New()
	// Each part is length-prefixed, so no two different requests can be
	// concatenated into the same byte stream.
	write := func(s string) {
		fmt.Fprintf(h, "%d:", len(s))
		h.Write([]byte(s))
	}
	write(method)
	write(route)
	for _, p := range sorted {
		write(p.Name)
		write(p.Value)
	}
	h.Write(canonicalBody)
	return hex.EncodeToString(h.Sum(nil))
}
