package payments

import (
	"context"
	"errors"
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
	// answer): an event that arrives sooner is answered with that answer
	// at once, and one lookup at the interval's end settles what it finds.
	DefaultEventLookupInterval = 500 * time.Millisecond
)

// finalAnswers makes the webhook's provider lookups cheap for the provider,
// whoever floods the webhook and however: a signed event costs a lookup
// only if no lookup of the same provider key is running (concurrent ones
// share one call, singleflight), no final answer about it is held (a
// short-lived cache), and no lookup of it was answered "not final" less
// than DefaultEventLookupInterval ago (the pace).
//
// Only the provider's definitive answers are held: a charge or refund it
// made, succeeded or declined (failed). Those never change at the provider:
// the outcome under a key is fixed once it exists. "No such call" is never
// held past the interval: the call may land a moment later (a request
// still in flight, whose webhook races our lookup). What the flights and
// the cache leave out, a flood of events about a call the provider does not
// have yet (a payment still pending), the pace bounds: after an answer that
// is not final, an event about that key inside the interval is answered
// with that answer at once (it waits for nothing, so one sender at a time
// costs no more than many), and the first such event schedules one lookup
// at the interval's end (the trailing lookup). If that lookup finds the
// call, it settles it (settle, given by the event), so a true event that
// raced its own call takes effect at most one interval later; if not, the
// next interval starts. A flood costs one lookup per interval in which
// events arrived, however they are sent.
//
// A lookup runs detached from the context of the event that started it,
// bounded by the lookup timeout alone, so that a sender who hangs up does
// not fail the others sharing the same answer; each event still stops
// waiting when its own context ends. close stops the trailing lookups.
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
	// lookup may go, that answer, and whether its trailing lookup is set.
	paced map[string]pacedKey
	// trailing are the timers of the trailing lookups to come; closed
	// stops new ones, and running counts the ones at work.
	trailing map[*time.Timer]bool
	closed   bool
	running  sync.WaitGroup
}

// pacedKey is a key's last answer that was not final (its error), when the
// next lookup may go, and whether a trailing lookup is set for then.
type pacedKey struct {
	next     time.Time
	err      error
	trailing bool
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
		held: make(map[string]heldAnswer[T]), paced: make(map[string]pacedKey), trailing: make(map[*time.Timer]bool)}
}

// find returns the provider's answer about key: held, the last answer
// inside its interval, shared with a lookup already running, or asked now.
// ask's nil-error answers are definitive (the Provider port's contract),
// so they are the ones held. Its errors come back as they are. settle, if
// not nil, applies a definitive answer that a trailing lookup finds.
func (a *finalAnswers[T]) find(ctx context.Context, key string, ask func(ctx context.Context, key string) (T, error), settle func(ctx context.Context, answer T)) (T, error) {
	for {
		if answer, ok := a.lookup(key); ok {
			return answer, nil
		}
		if err := a.paceOrTrail(key, ask, settle); err != nil {
			var zero T
			return zero, err
		}
		select {
		case res := <-a.ask(ctx, key, ask):
			if errors.Is(res.Err, errPaced) {
				// A lookup ended between the pace read above and this
				// one: its interval runs now, read it again.
				continue
			}
			answer, _ := res.Val.(T)
			return answer, res.Err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
}

// errPaced is ask's answer when key's interval started after its caller
// read the pace: a lookup that ended a moment before (its flight gone)
// has set it, and the caller reads it again instead of asking at once.
var errPaced = errors.New("paced")

// ask looks key up, shared with any lookup of it already running.
func (a *finalAnswers[T]) ask(ctx context.Context, key string, ask func(ctx context.Context, key string) (T, error)) <-chan singleflight.Result {
	return a.flight.DoChan(key, func() (any, error) {
		// A lookup that finished while this one queued may have left its
		// answer.
		if answer, ok := a.lookup(key); ok {
			return answer, nil
		}
		if a.inInterval(key) {
			var zero T
			return zero, errPaced
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
}

// inInterval tells whether key's interval runs.
func (a *finalAnswers[T]) inInterval(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.paced[key]
	return ok && a.now().Before(p.next)
}

// paceOrTrail returns key's last answer that was not final while its
// interval runs (nil once it has ended, or for a key not paced), and sets
// the interval's trailing lookup if none is set.
func (a *finalAnswers[T]) paceOrTrail(key string, ask func(ctx context.Context, key string) (T, error), settle func(ctx context.Context, answer T)) error {
	if a.ttl < 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.paced[key]
	wait := p.next.Sub(a.now())
	if !ok || wait <= 0 {
		return nil
	}
	if !p.trailing && !a.closed {
		p.trailing = true
		a.paced[key] = p
		var t *time.Timer
		a.running.Add(1)
		t = time.AfterFunc(wait, func() {
			defer a.running.Done()
			a.mu.Lock()
			delete(a.trailing, t)
			a.mu.Unlock()
			a.trail(key, ask, settle)
		})
		a.trailing[t] = true
	}
	return p.err
}

// trail is a trailing lookup: key asked about once its interval ended,
// and a definitive answer settled.
func (a *finalAnswers[T]) trail(key string, ask func(ctx context.Context, key string) (T, error), settle func(ctx context.Context, answer T)) {
	res := <-a.ask(context.Background(), key, ask)
	if res.Err != nil || settle == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	settle(ctx, res.Val.(T))
}

// close stops the trailing lookups to come and waits for the ones at work.
func (a *finalAnswers[T]) close() {
	a.mu.Lock()
	a.closed = true
	for t := range a.trailing {
		if t.Stop() {
			a.running.Done()
		}
		delete(a.trailing, t)
	}
	a.mu.Unlock()
	a.running.Wait()
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
	if ok && p.trailing && now.Before(p.next) {
		// A lookup inside the interval (a flight that started just before
		// it): the trailing lookup set for its end still goes.
		p.err = err
		a.paced[key] = p
		return
	}
	a.paced[key] = pacedKey{next: now.Add(a.interval), err: err}
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
