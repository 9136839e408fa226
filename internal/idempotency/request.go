package idempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// HeaderKey is the request header that carries the client's key.
const HeaderKey = "Idempotency-Key"

// Input is one keyed request as an adapter sees it, before the Keeper has
// checked anything.
type Input struct {
	Scope string   // who the key belongs to (the authenticated merchant)
	Keys  []string // the values of every Idempotency-Key header
	// Method and Path are the request's; Route is the route template that
	// matched (never a key or an id: it labels metrics).
	Method, Path, Route string
	Params              map[string]string // the path parameters
	Body                io.Reader         // read once, up to Config.MaxBodyBytes
}

// keyedRequest is one keyed request once its key is valid and its
// fingerprint computed.
type keyedRequest struct {
	Scope, Key, Method, Path, Route string
	Fingerprint                     string
	Body                            []byte
	sent                            [sha256.Size]byte // requestDigest of the body as sent
	// known is the key's completed record in the cache, if any.
	known *Record
}

// request checks the key and the body, and computes the fingerprint. It
// returns ErrKeyMissing, an error wrapping ErrKeyInvalid, ErrMalformedBody
// or ErrBodyRead, an *http.MaxBytesError, or ctx's error.
func (k *Keeper) request(ctx context.Context, in Input) (keyedRequest, error) {
	switch {
	case len(in.Keys) == 0:
		return keyedRequest{}, ErrKeyMissing
	case len(in.Keys) > 1:
		return keyedRequest{}, fmt.Errorf("%w: the header is repeated", ErrKeyInvalid)
	}
	key := in.Keys[0]
	if err := ValidateKey(key); err != nil {
		return keyedRequest{}, err
	}
	body, err := readBody(in.Body, k.cfg.MaxBodyBytes)
	if err != nil {
		return keyedRequest{}, err
	}
	req := keyedRequest{
		Scope: in.Scope, Key: key, Method: in.Method, Path: in.Path, Route: in.Route,
		Body: body, sent: requestDigest(in.Method, in.Route, in.Params, body),
	}
	// A retry of the very bytes of a request completed here has its
	// fingerprint: canonicalizing (most of a replay's work) is skipped.
	req.known = k.cfg.Cache.Get(ctx, in.Scope, key, k.now())
	if req.known != nil && req.known.sent == req.sent {
		req.Fingerprint = req.known.Fingerprint
		return req, nil
	}
	canonical, err := canonicalize(ctx, body)
	if err != nil {
		return keyedRequest{}, err
	}
	req.Fingerprint = fingerprint(in.Method, in.Route, in.Params, canonical)
	return req, nil
}

// readBody reads r whole, or refuses it past limit bytes.
func readBody(r io.Reader, limit int64) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		if tooLarge, ok := errors.AsType[*http.MaxBytesError](err); ok {
			// The server's own limit in front of ours (http.MaxBytesReader).
			return nil, tooLarge
		}
		return nil, fmt.Errorf("%w: %w", ErrBodyRead, err)
	}
	if int64(len(body)) > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	return body, nil
}
