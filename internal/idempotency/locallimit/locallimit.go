// Package locallimit is an idempotency.Limiter of one process: at most a
// quota of new keys per scope in each fixed window, counted in memory.
package locallimit

import (
	"context"
	"sync"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

// Limiter is an idempotency.Limiter of this process alone: at most limit new keys
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

var _ idempotency.Limiter = (*Limiter)(nil)

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

// AllowNewKey implements idempotency.Limiter. It holds one count per scope seen in the
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
