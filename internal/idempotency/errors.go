package idempotency

import (
	"errors"
	"time"
)

// Refusals of Keeper.Atomic and Keeper.Guarded, for the application's
// error table to answer: nothing here knows status codes.
var (
	// ErrKeyMissing: a request without an Idempotency-Key.
	ErrKeyMissing = errors.New("idempotency key missing")
	// ErrKeyInvalid: the key is empty, too long, repeated, or has characters
	// outside visible ASCII. Returned wrapped with the reason.
	ErrKeyInvalid = errors.New("idempotency key invalid")
	// ErrKeyReused: the key holds a different request (body, route, path).
	ErrKeyReused = errors.New("idempotency key reused with a different request")
	// ErrKeyExpired: with tombstones on, the key's record expired.
	ErrKeyExpired = errors.New("idempotency key expired")
	// ErrBodyRead: reading the body failed (the client hung up), wrapped.
	ErrBodyRead = errors.New("reading the request body failed")
	// ErrMalformedBody: the body is not valid JSON, repeats a member name,
	// or is beyond the canonicalization limits; wrapped with the reason.
	ErrMalformedBody = errors.New("malformed JSON body")
)

// Refusals that clear with time: send the request again after
// RetryAfter(err).
var (
	// ErrInProgress: the original still runs after Config.Wait, or another
	// request took its operation over.
	ErrInProgress = errors.New("a request with this idempotency key is still in progress")
	// ErrRateLimited: the scope started too many new keys (Config.NewKey
	// refused; RetryAfter tells when to try again).
	ErrRateLimited = errors.New("too many new idempotency keys")
)

// RetryAfter is how long a client should wait before sending a request that
// err refused again: what an error in err's chain with a RetryAfter method
// says (ErrRateLimited's), a second for ErrInProgress, zero for any other.
func RetryAfter(err error) time.Duration {
	if r, ok := errors.AsType[interface {
		error
		RetryAfter() time.Duration
	}](err); ok {
		return r.RetryAfter()
	}
	if errors.Is(err, ErrInProgress) {
		return retryAfter
	}
	return 0
}

// Errors returned by a Store.
var (
	// ErrKeyExists: a live (unexpired) record already holds the key.
	ErrKeyExists = errors.New("idempotency record exists")
	// ErrNotFound: no live record for the key.
	ErrNotFound = errors.New("idempotency record not found")
	// ErrFenced: another owner took the record over; the caller must not
	// write.
	ErrFenced = errors.New("idempotency record owned by another request")
)
