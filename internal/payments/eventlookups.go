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
)

// finalAnswers makes the webhook's provider lookups cheap for the provider,
// whoever floods the webhook: a signed event costs a lookup only if no
// lookup of the same provider key is running (concurrent ones share one
// call, singleflight) and no final answer about it is held (a short-lived
// cache).
//
// Only the provider's definitive answers are held: a charge or refund it
// made, succeeded or declined (failed). Those never change at the provider:
// the outcome under a key is fixed once it exists. "No such call" is never
// held: the call may land a moment later (a request still in flight, whose
// webhook races our lookup), and a cached absence would make that real event
// look forged and drop it until the cache forgets. Errors are never held
// either: the provider is asked again by the next delivery.
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

	flight singleflight.Group
	mu     sync.Mutex
	held   map[string]heldAnswer[T]
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
	return &finalAnswers[T]{ttl: ttl, size: size, timeout: timeout, now: now, held: make(map[string]heldAnswer[T])}
}

// find returns the provider's answer about key: held, shared with a lookup
// already running, or asked now. ask's nil-error answers are definitive
// (the Provider port's contract), so they are the ones held. Its errors
// come back as they are.
func (a *finalAnswers[T]) find(ctx context.Context, key string, ask func(ctx context.Context, key string) (T, error)) (T, error) {
	if answer, ok := a.lookup(key); ok {
		return answer, nil
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
	now := a.now()
	if len(a.held) >= a.size {
		for k, h := range a.held {
			if !now.Before(h.expires) {
				delete(a.held, k)
			}
		}
		if len(a.held) >= a.size {
			return
		}
	}
	a.held[key] = heldAnswer[T]{answer: answer, expires: now.Add(a.ttl)}
}
