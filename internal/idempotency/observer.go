package idempotency

import (
	"context"
	"errors"
	"time"
)

// The outcomes an Observer hears. Every keyed request ends in exactly one:
// these, or a refusal's.
const (
	outcomeExecuted  = "executed"  // ran the handler as a new operation
	outcomeRecovered = "recovered" // took over an abandoned record and resumed it
	outcomeReplayed  = "replayed"  // answered from a stored answer
	outcomeError     = "error"     // the store failed (503 and the like)
)

// refusals name the outcome of a refusal: the first whose error is in its
// chain.
var refusals = []struct {
	err     error
	outcome string
}{
	{ErrKeyMissing, "missing_key"},     // 400: no key
	{ErrKeyInvalid, "invalid_key"},     // 400: malformed key
	{ErrKeyReused, "mismatch"},         // 422: the key holds a different request
	{ErrKeyExpired, "expired"},         // 409: tombstones on, the key's record expired
	{ErrInProgress, "in_progress"},     // 409: the original still runs
	{ErrMalformedBody, "invalid_body"}, // 400: the body is not canonical JSON
	{ErrRateLimited, "rate_limited"},   // 429: too many new keys
	{ErrBodyRead, "client_gone"},       // the client hung up before the answer
	{context.Canceled, "client_gone"},
}

// outcomeOf is the Observer's name for an error answer.
func outcomeOf(err error) string {
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r.outcome
		}
	}
	return outcomeError
}

// Observer hears what the Keeper decides, for metrics and tracing: ctx is
// the request's, route its template (never a key or an id), and an
// outcome one of those above. It must be cheap and safe for concurrent use.
type Observer interface {
	Outcome(ctx context.Context, route string, outcome string)
	// Waited is how long a duplicate waited for its original.
	Waited(ctx context.Context, route string, d time.Duration)
	// Processed is how long the handler ran.
	Processed(ctx context.Context, route string, d time.Duration)
}

type noObserver struct{}

func (noObserver) Outcome(context.Context, string, string)          {}
func (noObserver) Waited(context.Context, string, time.Duration)    {}
func (noObserver) Processed(context.Context, string, time.Duration) {}
