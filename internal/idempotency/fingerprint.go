package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/idemkeys/payments/internal/canon"
)

// fingerprint identifies a request for one key: method, route template,
// path parameters and the canonical body.
func fingerprint(method, route string, params map[string]string, canonicalBody []byte) string {
	sum := requestDigest(method, route, params, canonicalBody)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// requestDigest is the SHA-256 of method, route template, path parameters
// (sorted by name) and body, each part but the body length-prefixed so
// that no two requests hash the same bytes (canon.Digest). Up to four
// parameters are sorted on the stack.
func requestDigest(method, route string, params map[string]string, body []byte) [sha256.Size]byte {
	var few [4]string
	names := few[:0]
	for name := range params {
		names = append(names, name)
	}
	slices.Sort(names)
	var all [2 + 2*len(few)]string
	parts := append(all[:0], method, route)
	for _, name := range names {
		parts = append(parts, name, params[name])
	}
	return canon.Digest(body, parts...)
}

// canonicalize is body as canonical JSON (RFC 8785), so that member order,
// whitespace, number spelling and escapes do not make two requests differ;
// or ErrMalformedBody, with the reason.
func canonicalize(ctx context.Context, body []byte) ([]byte, error) {
	out, err := canon.Limits{}.Canonicalize(ctx, body)
	if e, ok := errors.AsType[*canon.Error](err); ok {
		return nil, fmt.Errorf("%w: %s", ErrMalformedBody, e.Reason)
	}
	return out, err
}
