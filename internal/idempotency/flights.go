package idempotency

import (
	"context"
	"sync"
)

// flights coalesces concurrent requests for one key inside one process. The
// first becomes the leader and talks to the database; the others wait on its
// flight without holding a connection, and when it lands they take the
// stored record it hands them, or take their turn if it left none. A retry
// storm on one key thus costs one database conversation per process at a
// time, not one per request.
type flights struct {
	mu sync.Mutex
	m  map[flightID]*flight
}

type flight struct {
	done chan struct{}
	// rec is the completed record the leader stored or replayed, if any;
	// written before done is closed.
	rec *Record
}

// flightID is what identical requests share: only they share a flight.
type flightID struct{ scope, key, fingerprint string }

func newFlights() *flights {
	return &flights{m: make(map[flightID]*flight)}
}

// acquire makes the caller the leader for id, waiting for earlier leaders
// to land (waited tells whether it had to). While it waits, a landed leader
// that left a completed record hands it over: acquire then returns that
// record and no flight. It waits on the context wait returns (asked only
// when there is something to wait for), and returns its error when it ends
// first.
func (f *flights) acquire(wait func() context.Context, id flightID) (fl *flight, handed *Record, waited bool, err error) {
	for {
		f.mu.Lock()
		cur, busy := f.m[id]
		if !busy {
			fl := &flight{done: make(chan struct{})}
			f.m[id] = fl
			f.mu.Unlock()
			return fl, nil, waited, nil
		}
		f.mu.Unlock()
		waited = true
		select {
		case <-cur.done:
			if cur.rec != nil {
				return nil, cur.rec, true, nil
			}
		case <-wait().Done():
			return nil, nil, true, wait().Err()
		}
	}
}

// land ends the leader's flight, handing rec (a completed record, or nil)
// to the waiters.
func (f *flights) land(id flightID, fl *flight, rec *Record) {
	f.mu.Lock()
	delete(f.m, id)
	f.mu.Unlock()
	fl.rec = rec
	close(fl.done)
}
