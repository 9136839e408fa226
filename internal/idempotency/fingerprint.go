package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
)

// fingerprint identifies a request for one key: method, route template,
// path parameters (sorted by name) and the canonical body. Two requests with
// the same fingerprint are the same logical request.
func fingerprint(method, route string, params map[string]string, canonicalBody []byte) string {
	names := slices.Sorted(maps.Keys(params))

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
	for _, name := range names {
		write(name)
		write(params[name])
	}
	h.Write(canonicalBody)
	var sum [sha256.Size]byte
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], h.Sum(sum[:0]))
	return string(out[:])
}
