// Package locallimit bounds how many new keys a scope may start: Limiter,
// one process's quota per fixed window, counted in memory, and Store, which
// applies a quota (this one, or redisidem's) to a Store's inserts.
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

// Quota is what Store asks before a new key: this package's Limiter, or
// redisidem.Limiter, shared by every instance.
type Quota interface {
	// AllowNewKey reports whether the scope may start one more key now,
	// and if not, when it may.
	AllowNewKey(ctx context.Context, scope string) (retryAfter time.Duration, ok bool)
}

// Store is an idempotency.Store that bounds how many new keys a scope
// starts: its Insert, which starts every new key, asks the quota first.
// A refusal is ErrRateLimited with when to try again, unless the key has a
// live record, which the insert would have found: a request whose key has
// a record is never refused, and a refused one has written nothing.
type Store struct {
	idempotency.Store
	quota Quota
}

// NewStore bounds the new keys of next by quota.
func NewStore(next idempotency.Store, quota Quota) *Store {
	return &Store{Store: next, quota: quota}
}

// Insert implements idempotency.Store.
func (s *Store) Insert(ctx context.Context, rec *idempotency.Record) error {
	retryAfter, ok := s.quota.AllowNewKey(ctx, rec.Scope)
	if ok {
		return s.Store.Insert(ctx, rec)
	}
	switch _, err := s.Store.Get(ctx, rec.Scope, rec.Key, rec.CreatedAt); {
	case err == nil:
		return idempotency.ErrKeyExists
	case !errors.Is(err, idempotency.ErrNotFound):
		return err
	}
	return refusal(retryAfter)
}

// refusal is ErrRateLimited, and when to try again.
type refusal time.Duration

func (refusal) Error() string               { return idempotency.ErrRateLimited.Error() }
func (refusal) Unwrap() error               { return idempotency.ErrRateLimited }
func (r refusal) RetryAfter() time.Duration { return time.Duration(r) }
