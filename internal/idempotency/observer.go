package idempotency

import (
	"context"
	"time"
)

// Outcome is what the middleware did with one keyed request.
type Outcome string

// The outcomes an Observer hears. Every keyed request ends in exactly one.
const (
	OutcomeExecuted    Outcome = "executed"     // ran the handler as a new operation
	OutcomeRecovered   Outcome = "recovered"    // took over an abandoned record and resumed it
	OutcomeReplayed    Outcome = "replayed"     // answered from a stored response
	OutcomeMismatch    Outcome = "mismatch"     // 422: the key holds a different request
	OutcomeExpired     Outcome = "expired"      // 409: tombstones on, the key's record expired
	OutcomeInProgress  Outcome = "in_progress"  // 409: the original still runs
	OutcomeInvalidKey  Outcome = "invalid_key"  // 400: malformed key
	OutcomeMissingKey  Outcome = "missing_key"  // 400: no key
	OutcomeInvalidBody Outcome = "invalid_body" // 400: the body is not canonical JSON
	OutcomeRateLimited Outcome = "rate_limited" // 429: too many new keys
	OutcomeClientGone  Outcome = "client_gone"  // the client hung up before the answer
	OutcomeError       Outcome = "error"        // the store failed (503 and the like)
)

// Observer hears what the middleware decides, for metrics and tracing.
// ctx is the request's context (a tracing Observer finds the request's span
// in it); route is the route template (never a key or an id).
// Implementations must be cheap and safe for concurrent use.
type Observer interface {
	Outcome(ctx context.Context, route string, o Outcome)
	// Waited is how long a duplicate waited for its original.
	Waited(ctx context.Context, route string, d time.Duration)
	// Processed is how long the handler ran.
	Processed(ctx context.Context, route string, d time.Duration)
}

type noObserver struct{}

func (noObserver) Outcome(context.Context, string, Outcome)         {}
func (noObserver) Waited(context.Context, string, time.Duration)    {}
func (noObserver) Processed(context.Context, string, time.Duration) {}
