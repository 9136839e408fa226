// Package flights coalesces concurrent work on one id inside one process.
// The first caller becomes the leader and does the work; the others wait
// on its flight without holding anything, and when it lands they take the
// value it hands them, or take their turn if it handed none. The
// idempotency core runs identical keyed requests through it (a package of
// no domain, as internal/canon is), so a retry storm on one key costs one
// database conversation per process at a time, not one per request.
package flights

import (
	"context"
	"sync"
)

// Group is the flights under way, by id. The zero Group is not ready: make
// one with New.
type Group[ID comparable, V any] struct {
	mu sync.Mutex
	m  map[ID]*Flight[V]
}

// Flight is one leader's work on an id.
type Flight[V any] struct {
	done chan struct{}
	// handed is what the leader left for its waiters, if anything;
	// written before done is closed.
	handed *V
}

// New returns an empty Group.
func New[ID comparable, V any]() *Group[ID, V] {
	return &Group[ID, V]{m: make(map[ID]*Flight[V])}
}

// Acquire makes the caller the leader for id, waiting for earlier leaders
// to land (waited tells whether it had to). While it waits, a landed leader
// that handed a value over ends the wait: Acquire then returns that value
// and no flight. It waits on the context wait returns (asked only when
// there is something to wait for), and returns its error when it ends
// first.
func (g *Group[ID, V]) Acquire(wait func() context.Context, id ID) (fl *Flight[V], handed *V, waited bool, err error) {
	for {
		g.mu.Lock()
		cur, busy := g.m[id]
		if !busy {
			fl := &Flight[V]{done: make(chan struct{})}
			g.m[id] = fl
			g.mu.Unlock()
			return fl, nil, waited, nil
		}
		g.mu.Unlock()
		waited = true
		select {
		case <-cur.done:
			if cur.handed != nil {
				return nil, cur.handed, true, nil
			}
		case <-wait().Done():
			return nil, nil, true, wait().Err()
		}
	}
}

// Land ends the leader's flight, handing v (or nil: nothing, the next
// waiter leads) to the waiters.
func (g *Group[ID, V]) Land(id ID, fl *Flight[V], v *V) {
	g.mu.Lock()
	delete(g.m, id)
	g.mu.Unlock()
	fl.handed = v
	close(fl.done)
}
