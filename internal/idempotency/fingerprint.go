package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"sync"

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
// that no two requests hash the same bytes.
func requestDigest(method, route string, params map[string]string, body []byte) (sum [sha256.Size]byte) {
	d := digesters.Get().(*digester)
	defer digesters.Put(d)
	b := d.prefix[:0]
	put := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	put(method)
	put(route)
	var few [4]string
	names := few[:0]
	for name := range params {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		put(name)
		put(params[name])
	}
	d.prefix = b
	d.h.Reset()
	d.h.Write(b)
	d.h.Write(body)
	d.sum = d.h.Sum(d.sum[:0])
	copy(sum[:], d.sum)
	return sum
}

// digester is a hash and its buffers, kept between requests.
type digester struct {
	h           hash.Hash
	prefix, sum []byte
}

var digesters = sync.Pool{New: func() any { return &digester{h: sha256.New()} }}

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
