// Package localcache keeps completed idempotency records in one process's
// memory, so that a replay on the instance that stored the answer touches
// neither the database nor Redis. It is an idempotency.Cache, in front of
// another one when given it (redisidem's, shared by every instance), and
// wired beside the core (internal/app sets Config.Cache); a core without
// it reads every replay from the store.
package localcache

import (
	"context"
	"sync"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

// DefaultSize is how many completed records an instance keeps: about 2 KB
// each with an order's answer, so some 8 MB of live heap (twice that at
// the garbage collector's peak). Retries come within seconds of the
// original, so the newest few thousand keys are the ones replays ask for.
const DefaultSize = 4096

// Cache holds completed records this instance committed or read. A
// completed record is immutable until it expires, so the copy can never
// disagree with the store; an entry is dropped at its record's expiry, and
// nothing that is not committed and completed enters. When full, an
// arbitrary entry makes room (a map's iteration order): the cache is an
// accelerator, and a miss only costs the path it saves.
type Cache struct {
	mu   sync.Mutex
	max  int
	recs map[localKey]*idempotency.Record
	next idempotency.Cache // asked on a miss, told everything; nil for none
}

// New returns a cache of at most size records in front of next (nil for
// none).
func New(size int, next idempotency.Cache) *Cache {
	return &Cache{max: max(size, 1), recs: make(map[localKey]*idempotency.Record, min(size, 1024)), next: next}
}

// localKey is a record's key in the map: the two strings as they are,
// where joining them into one made a string on every lookup of a key
// longer than a few dozen bytes (a UUID), a replay's included.
type localKey struct{ scope, key string }

// Get returns the live completed record of the key from memory, or else
// from next, kept in memory then.
func (c *Cache) Get(ctx context.Context, scope, key string, now time.Time) *idempotency.Record {
	k := localKey{scope, key}
	c.mu.Lock()
	rec := c.recs[k]
	if rec != nil && !rec.ExpiresAt.After(now) {
		delete(c.recs, k)
		rec = nil
	}
	c.mu.Unlock()
	if rec != nil || c.next == nil {
		return rec
	}
	rec = c.next.Get(ctx, scope, key, now)
	c.put(rec)
	return rec
}

// Keep keeps rec, a record just committed as completed or read completed
// from the store, here and in next.
func (c *Cache) Keep(rec *idempotency.Record) {
	c.put(rec)
	if c.next != nil {
		c.next.Keep(rec)
	}
}

func (c *Cache) put(rec *idempotency.Record) {
	if rec == nil || rec.State != idempotency.StateCompleted || rec.Answer == nil {
		return
	}
	k := localKey{rec.Scope, rec.Key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.recs[k]; !ok && len(c.recs) >= c.max {
		for victim := range c.recs {
			delete(c.recs, victim)
			break
		}
	}
	c.recs[k] = rec
}

// Changed tells next; this process's waiters poll.
func (c *Cache) Changed(scope, key string) {
	if c.next != nil {
		c.next.Changed(scope, key)
	}
}

// Subscribe is next's; without it, a nil channel (the waiters poll).
func (c *Cache) Subscribe(scope, key string) (<-chan struct{}, func()) {
	if c.next != nil {
		return c.next.Subscribe(scope, key)
	}
	return nil, func() {}
}
