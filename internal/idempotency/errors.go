package idempotency

import (
	"errors"
	"time"
)

// Errors the middleware hands to its ErrorRenderer. The HTTP layer maps each
// to its problem+json answer; nothing here knows about status codes.
var (
	// ErrKeyMissing: a POST without an Idempotency-Key header.
	ErrKeyMissing = errors.New("idempotency key missing")
	// ErrKeyInvalid: the key is empty, too long, repeated, or has characters
	// outside visible ASCII. Returned wrapped with the reason.
	ErrKeyInvalid = errors.New("idempotency key invalid")
	// ErrKeyReused: the key was used for a different request (other body,
	// route or path) by the same merchant.
	ErrKeyReused = errors.New("idempotency key reused with a different request")
	// ErrMalformedBody: the body is not valid JSON or repeats a member name.
	// Returned wrapped with the reason.
	ErrMalformedBody = errors.New("malformed JSON body")
)

// InProgressError says the original request with this key still runs after
// the configured wait. RetryAfter is a hint for the client.
type InProgressError struct {
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	return "a request with this idempotency key is still in progress"
}

// Errors returned by a Store.
var (
	// ErrKeyExists: a live (unexpired) record already holds the key.
	ErrKeyExists = errors.New("idempotency record exists")
	// ErrNotFound: no live record for the key.
	ErrNotFound = errors.New("idempotency record not found")
	// ErrFenced: the caller's fencing token is stale; another owner took the
	// record over, so the caller must not write.
	ErrFenced = errors.New("idempotency record owned by another request")
)

// RateLimitedError says the merchant started too many new keys; RetryAfter
// is when the next one will be accepted.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string { return "too many new idempotency keys" }
