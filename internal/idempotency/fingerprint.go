package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// MaxBodyDepth bounds how deeply a body's arrays and objects may nest. No
// request of the API comes near it (an order is three levels deep); it is
// there because canonicalizing takes time that grows with the square of the
// depth: a 1 MB body nested 9,000 levels deep held a core for 20 seconds.
const MaxBodyDepth = 32

// nesting returns the deepest level of arrays and objects in valid JSON.
func nesting(body []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, b := range body {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch b {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '[' || b == '{':
			depth++
			deepest = max(deepest, depth)
		case b == ']' || b == '}':
			depth--
		}
	}
	return deepest
}

// Limits bound the work of canonicalizing a body. Zero fields take the
// defaults.
type Limits struct {
	// MaxDepth bounds how deeply arrays and objects may nest (default
	// MaxBodyDepth).
	MaxDepth int
}

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = MaxBodyDepth
	}
	return l
}

// Canonicalize is the package's Canonicalize under these limits.
func (l Limits) Canonicalize(body []byte) ([]byte, error) {
	return canonicalize(body, l.withDefaults())
}

// Canonicalize returns body as canonical JSON (RFC 8785, JCS): members sorted,
// no insignificant whitespace, numbers and strings in one spelling. An empty
// body canonicalizes to "{}" so that "no body" and "empty object" are one
// request. It returns an error wrapping ErrMalformedBody for invalid JSON,
// for an object that repeats a member name, and for a body nested deeper
// than MaxBodyDepth.
func Canonicalize(body []byte) ([]byte, error) {
	return canonicalize(body, Limits{}.withDefaults())
}

func canonicalize(body []byte, l Limits) ([]byte, error) {
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
	if depth := nesting(trimmed); depth > l.MaxDepth {
		return nil, fmt.Errorf("%w: the body nests %d levels deep, more than %d", ErrMalformedBody, depth, l.MaxDepth)
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
	sorted := slices.Clone(params)
	slices.SortStableFunc(sorted, func(a, b Param) int { return strings.Compare(a.Name, b.Name) })

	h := sha256.New()
	// Each part is length-prefixed, so no two different requests can be
	// concatenated into the same byte stream.
	var prefix [24]byte
	write := func(s string) {
		h.Write(strconv.AppendInt(prefix[:0], int64(len(s)), 10))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	write(method)
	write(route)
	for _, p := range sorted {
		write(p.Name)
		write(p.Value)
	}
	h.Write(canonicalBody)
	var sum [sha256.Size]byte
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], h.Sum(sum[:0]))
	return string(out[:])
}
