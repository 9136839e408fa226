package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
)

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
