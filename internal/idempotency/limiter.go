package idempotency

import (
	"context"
	"sync"
	"time"
)

// localLimiter is a Limiter of this process alone: at most limit new keys
// per scope in each fixed window (aligned on the clock, window start =
// now truncated to the window). It is the limit when no Redis is
// configured, and what the shared limiter falls back to when Redis cannot
// answer: with n instances a scope may then start up to n × limit keys per
// window, never an unlimited number.
type localLimiter struct {
	limit  int64
	window time.Duration
	clock  Clock

	mu     sync.Mutex
	start  time.Time // the window the counts belong to
	counts map[string]int64
}

// newLocalLimiter allows limit new keys per scope per window.
func newLocalLimiter(limit int, window time.Duration, clock Clock) *localLimiter {
	return &localLimiter{limit: int64(limit), window: window, clock: clock, counts: map[string]int64{}}
}

// AllowNewKey implements Limiter. It holds one count per scope seen in the
// current window and drops them all when the window turns, so its memory is
// the number of scopes active in one window.
func (l *localLimiter) AllowNewKey(_ context.Context, scope string) (time.Duration, bool) {
	now := l.clock.Now()
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
