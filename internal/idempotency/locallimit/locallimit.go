// Package locallimit bounds how many new keys a scope may start: Limiter,
// one process's quota per fixed window, counted in memory, and Gate, which
// asks a quota (this one, or redisidem's) for the Keeper (Config.NewKey).
package locallimit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

// Limiter is a Quota of this process alone: at most limit new keys
// per scope in each fixed window (aligned on the clock, window start =
// now truncated to the window). It is the limit when no Redis is
// configured, and what the shared limiter falls back to when Redis cannot
// answer: with n instances a scope may then start up to n × limit keys per
// window, never an unlimited number.
type Limiter struct {
	limit  int64
	window time.Duration
	now    func() time.Time

	mu     sync.Mutex
	start  time.Time // the window the counts belong to
	counts map[string]int64
}

var _ Quota = (*Limiter)(nil)

// New allows limit new keys per scope per window (a second when window
// is zero), by the clock now (nil: the wall clock).
func New(limit int, window time.Duration, now func() time.Time) *Limiter {
	if window <= 0 {
		window = time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{limit: int64(limit), window: window, now: now, counts: map[string]int64{}}
}

// AllowNewKey implements Quota. It holds one count per scope seen in the
// current window and drops them all when the window turns, so its memory is
// the number of scopes active in one window.
func (l *Limiter) AllowNewKey(_ context.Context, scope string) (time.Duration, bool) {
	now := l.now()
	start := now.Truncate(l.window)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !start.Equal(l.start) {
		l.start, l.counts = start, map[string]int64{}
	}
	if l.counts[scope] >= l.limit {
		return start.Add(l.window).Sub(now), false
	}
	l.counts[scope]++
	return 0, true
}

// Quota is what Gate asks before a new key: this package's Limiter, or
// redisidem.Limiter, shared by every instance.
type Quota interface {
	// AllowNewKey reports whether the scope may start one more key now,
	// and if not, when it may.
	AllowNewKey(ctx context.Context, scope string) (retryAfter time.Duration, ok bool)
}

// Gate is the Keeper's Config.NewKey for quota, asked before a new key's
// work begins. Past the quota it refuses with ErrRateLimited and when to
// try again, unless the key has a live record after all (another request
// made it meanwhile), which it returns, to be decided on: a request whose
// key has a record is never refused, and a refused one does no work.
func Gate(store idempotency.Store, quota Quota) func(ctx context.Context, scope, key string, now time.Time) (*idempotency.Record, error) {
	return func(ctx context.Context, scope, key string, now time.Time) (*idempotency.Record, error) {
		retryAfter, ok := quota.AllowNewKey(ctx, scope)
		if ok {
			return nil, nil
		}
		rec, err := store.Get(ctx, scope, key, now)
		if errors.Is(err, idempotency.ErrNotFound) {
			return nil, refusal(retryAfter)
		}
		return rec, err
	}
}

// refusal is ErrRateLimited, and when to try again.
type refusal time.Duration

func (refusal) Error() string               { return idempotency.ErrRateLimited.Error() }
func (refusal) Unwrap() error               { return idempotency.ErrRateLimited }
func (r refusal) RetryAfter() time.Duration { return time.Duration(r) }
