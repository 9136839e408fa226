package idempotency

import (
	"errors"
	"fmt"
	"time"
)

// Errors a Result carries for the HTTP layer to answer. The adapter hands
// them to the application's error table; nothing here knows about status
// codes.
var (
	// ErrKeyMissing: a request without an Idempotency-Key.
	ErrKeyMissing = errors.New("idempotency key missing")
	// ErrKeyInvalid: the key is empty, too long, repeated, or has characters
	// outside visible ASCII. Returned wrapped with the reason.
	ErrKeyInvalid = errors.New("idempotency key invalid")
	// ErrKeyReused: the key was used for a different request (other body,
	// route or path) in the same scope.
	ErrKeyReused = errors.New("idempotency key reused with a different request")
	// ErrKeyExpired: with tombstones on, the key's record expired; the
	// same request again executes nothing.
	ErrKeyExpired = errors.New("idempotency key expired")
	// ErrBodyRead: reading the request body failed: the client hung up or
	// stopped sending. Returned wrapped with the reader's error.
	ErrBodyRead = errors.New("reading the request body failed")
	// ErrMalformedBody: the body is not valid JSON, repeats a member name,
	// or is beyond the canonicalization limits. Returned wrapped with the
	// reason.
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

// RateLimitedError says the scope started too many new keys; RetryAfter is
// when the next one will be accepted.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string { return "too many new idempotency keys" }

// BodyTooLargeError says the body is larger than Config.MaxBodyBytes; the
// Keeper read no more than Limit+1 bytes of it.
type BodyTooLargeError struct {
	Limit int64
}

func (e *BodyTooLargeError) Error() string {
	return fmt.Sprintf("request body larger than %d bytes", e.Limit)
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

// ErrLocked: Finish found the record held by a running request, which will
// store the answer itself.
var ErrLocked = errors.New("idempotency record is locked by a running request")
