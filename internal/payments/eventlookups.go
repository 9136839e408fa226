package payments

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Bounds of the webhook lookups' cache (WithEventCache).
const (
	// DefaultEventCacheTTL is how long a final provider answer is reused
	// for later events about the same call.
	DefaultEventCacheTTL = 10 * time.Second
	// DefaultEventCacheSize bounds the answers held at once, per kind
	// (charges, refunds).
	DefaultEventCacheSize = 10_000
	// DefaultEventLookupInterval is how often the provider is asked again
	// about a call whose last answer was not final ("no such call", or no
	// answer): an event that arrives sooner waits for the next lookup
	// and shares it.
	DefaultEventLookupInterval = 500 * time.Millisecond
)

// finalAnswers makes the webhook's provider lookups cheap for the provider,
// whoever floods the webhook: a signed event costs a lookup only if no
// lookup of the same provider key is running (concurrent ones share one
// call, singleflight) and no final answer about it is held (a short-lived
// cache), and no lookup of it was answered "not final" less than
// DefaultEventLookupInterval ago (the pace).
//
// Only the provider's definitive answers are held: a charge or refund it
// made, succeeded or declined (failed). Those never change at the provider:
// the outcome under a key is fixed once it exists. "No such call" is never
// held: the call may land a moment later (a request still in flight, whose
// webhook races our lookup), and a cached absence would make that real event
// look forged and drop it until the cache forgets. Errors are never held
// either. What the flights and the cache leave out, a flood of events
// about a call the provider does not have yet (a payment still pending),
// the pace bounds: after an answer that is not final, the next lookup of
// that key waits until the interval has passed, and every event arriving
// meanwhile waits for it and shares it. So a flood costs a lookup per
// interval, and a true event that races the call still meets a fresh
// answer, at most one interval late, instead of a held absence.
//
// The shared call runs detached from the context of the event that started
// it, bounded by the lookup timeout alone, so that a sender who hangs up
// does not fail the others waiting on the same answer; each waiter still
// stops waiting when its own context ends.
type finalAnswers[T any] struct {
	ttl     time.Duration
	size    int
	timeout time.Duration
	now     func() time.Time
	// interval is the pace after an answer that was not final
	// (DefaultEventLookupInterval).
	interval time.Duration

	flight singleflight.Group
	mu     sync.Mutex
	held   map[string]heldAnswer[T]
	// paced is, per key whose last answer was not final, when the next
	// lookup may go, and that answer.
	paced map[string]pacedKey
}

// pacedKey is a key's last answer that was not final (its error), when the
// next lookup may go, and how many such answers came before (so that an
// event that waited knows whether a lookup answered meanwhile).
type pacedKey struct {
	next time.Time
	err  error
	gen  int
}

type heldAnswer[T any] struct {
	answer  T
	expires time.Time
}

func newFinalAnswers[T any](ttl time.Duration, size int, timeout time.Duration, now func() time.Time) *finalAnswers[T] {
	if ttl == 0 {
		ttl = DefaultEventCacheTTL
	}
	if size <= 0 {
		size = DefaultEventCacheSize
	}
	if timeout <= 0 {
		timeout = DefaultEventLookupTimeout
	}
	return &finalAnswers[T]{ttl: ttl, size: size, timeout: timeout, now: now, interval: DefaultEventLookupInterval,
		held: make(map[string]heldAnswer[T]), paced: make(map[string]pacedKey)}
}

// find returns the provider's answer about key: held, shared with a lookup
// already running, or asked now. ask's nil-error answers are definitive
// (the Provider port's contract), so they are the ones held. Its errors
// come back as they are.
func (a *finalAnswers[T]) find(ctx context.Context, key string, ask func(ctx context.Context, key string) (T, error)) (T, error) {
	if answer, ok := a.lookup(key); ok {
		return answer, nil
	}
	if wait, gen := a.pace(key); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			var zero T
			return zero, ctx.Err()
		}
		// The lookup this event waited for may have answered already.
		if answer, ok := a.lookup(key); ok {
			return answer, nil
		}
		if p, ok := a.pacedAt(key); ok && p.gen != gen {
			var zero T
			return zero, p.err
		}
	}
	ch := a.flight.DoChan(key, func() (any, error) {
		// A lookup that finished while this one queued may have left its
		// answer.
		if answer, ok := a.lookup(key); ok {
			return answer, nil
		}
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
		defer cancel()
		answer, err := ask(callCtx, key)
		if err != nil {
			a.slowDown(key, err)
			return answer, err
		}
		a.keep(key, answer)
		return answer, nil
	})
	select {
	case res := <-ch:
		answer, _ := res.Val.(T)
		return answer, res.Err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// pace is how long a lookup of key must wait for the interval since the
// last answer about it that was not final (zero when it may go now), and
// that answer's generation.
func (a *finalAnswers[T]) pace(key string) (time.Duration, int) {
	p, ok := a.pacedAt(key)
	if !ok {
		return 0, 0
	}
	return max(0, p.next.Sub(a.now())), p.gen
}

func (a *finalAnswers[T]) pacedAt(key string) (pacedKey, bool) {
	if a.ttl < 0 {
		return pacedKey{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.paced[key]
	return p, ok
}

// slowDown starts key's interval after an answer that was not final, err.
// The map is bounded as the held answers are: past the bound, the
// intervals that ended go, and a key that finds no room is not paced.
func (a *finalAnswers[T]) slowDown(key string, err error) {
	if a.ttl < 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	p, ok := a.paced[key]
	if !ok && !room(a.paced, a.size, func(q pacedKey) bool { return !now.Before(q.next) }) {
		return
	}
	a.paced[key] = pacedKey{next: now.Add(a.interval), err: err, gen: p.gen + 1}
}

// room makes room for one more entry in m, bounded to size, by dropping
// the entries that ended; false when it is still full.
func room[V any](m map[string]V, size int, ended func(V) bool) bool {
	if len(m) < size {
		return true
	}
	for k, v := range m {
		if ended(v) {
			delete(m, k)
		}
	}
	return len(m) < size
}

func (a *finalAnswers[T]) lookup(key string) (T, bool) {
	if a.ttl < 0 {
		var zero T
		return zero, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.held[key]
	if !ok || !a.now().Before(h.expires) {
		var zero T
		return zero, false
	}
	return h.answer, true
}

// keep holds answer until the TTL passes. When the cache is full, expired
// answers go first; if it is still full the answer is not held (the next
// event asks again): the bound holds whatever the traffic.
func (a *finalAnswers[T]) keep(key string, answer T) {
	if a.ttl < 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.paced, key)
	now := a.now()
	if !room(a.held, a.size, func(h heldAnswer[T]) bool { return !now.Before(h.expires) }) {
		return
	}
	a.held[key] = heldAnswer[T]{answer: answer, expires: now.Add(a.ttl)}
}
