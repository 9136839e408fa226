package idempotency

import (
	"context"
	"time"
)

// The outcomes an Observer hears. Every keyed request ends in exactly one.
const (
	outcomeExecuted    = "executed"     // ran the handler as a new operation
	outcomeRecovered   = "recovered"    // took over an abandoned record and resumed it
	outcomeReplayed    = "replayed"     // answered from a stored answer
	outcomeMismatch    = "mismatch"     // 422: the key holds a different request
	outcomeExpired     = "expired"      // 409: tombstones on, the key's record expired
	outcomeInProgress  = "in_progress"  // 409: the original still runs
	outcomeInvalidKey  = "invalid_key"  // 400: malformed key
	outcomeMissingKey  = "missing_key"  // 400: no key
	outcomeInvalidBody = "invalid_body" // 400: the body is not canonical JSON
	outcomeRateLimited = "rate_limited" // 429: too many new keys
	outcomeClientGone  = "client_gone"  // the client hung up before the answer
	outcomeError       = "error"        // the store failed (503 and the like)
)

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
