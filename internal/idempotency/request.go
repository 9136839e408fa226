package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/idemkeys/payments/internal/canon"
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

// keyedRequest is one keyed request once its key is valid and its body read.
type keyedRequest struct {
	Scope, Key, Method, Path, Route string
	Params                          map[string]string
	Fingerprint                     string // set by fingerprintFor, before any decision
	Body                            []byte
	sent                            [sha256.Size]byte // requestDigest of the body as sent
	// known is the key's completed record in the cache, if any.
	known *Record
}

// request checks the key and reads the body. It returns ErrKeyMissing, an
// error wrapping ErrKeyInvalid or ErrBodyRead, an *http.MaxBytesError, or
// ctx's error.
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
	return keyedRequest{
		Scope: in.Scope, Key: key, Method: in.Method, Path: in.Path, Route: in.Route, Params: in.Params,
		Body: body, sent: requestDigest(in.Method, in.Route, in.Params, body),
		known: k.cfg.Cache.Get(ctx, in.Scope, key, k.now()),
	}, nil
}

// fingerprintFor sets the fingerprint to decide on rec (nil: none) with: a
// record of the very bytes sent has it (Record.Sent), so that no instance
// canonicalizes their retry; else the body's, or ErrMalformedBody.
func (req *keyedRequest) fingerprintFor(ctx context.Context, rec *Record) error {
	switch {
	case req.Fingerprint != "":
	case rec != nil && rec.Sent == req.sent:
		req.Fingerprint = rec.Fingerprint
	default:
		canonical, err := canonicalize(ctx, req.Body)
		if err != nil {
			return err
		}
		req.Fingerprint = fingerprint(req.Method, req.Route, req.Params, canonical)
	}
	return nil
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

// MaxKeyLength is the longest Idempotency-Key accepted.
const MaxKeyLength = 255

// KeyPattern is ValidateKey's rule as a regular expression (ECMA-262 and Go
// syntax alike), for the OpenAPI document's Idempotency-Key parameters.
const KeyPattern = `^[\x21-\x7E]{1,255}$`

// ValidateKey checks a key's shape: 1 to 255 characters of visible ASCII
// (no header injection, nothing that logs or compares oddly). It returns
// nil or an error wrapping ErrKeyInvalid.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: the key is empty", ErrKeyInvalid)
	}
	if len(key) > MaxKeyLength {
		return fmt.Errorf("%w: the key is longer than %d characters", ErrKeyInvalid, MaxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: character %d is outside visible ASCII (0x21-0x7E)", ErrKeyInvalid, i+1)
		}
	}
	return nil
}

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
