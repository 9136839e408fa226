// Package localcache keeps completed idempotency records in one process's
// memory (idempotency.Memory), so that a replay on the instance that
// stored the answer touches neither the database nor Redis. It is wired
// beside the core (internal/app sets Config.Memory); a core without it
// reads every replay from the cache or the store.
package localcache

import (
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
}

// New returns a cache of at most size records.
func New(size int) *Cache {
	return &Cache{max: max(size, 1), recs: make(map[localKey]*idempotency.Record, min(size, 1024))}
}

// localKey is a record's key in the map: the two strings as they are,
// where joining them into one made a string on every lookup of a key
// longer than a few dozen bytes (a UUID), a replay's included.
type localKey struct{ scope, key string }

// Get returns the live completed record of the key, or nil.
func (c *Cache) Get(scope, key string, now time.Time) *idempotency.Record {
	k := localKey{scope, key}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.recs[k]
	if rec != nil && !rec.ExpiresAt.After(now) {
		delete(c.recs, k)
		return nil
	}
	return rec
}

// Put keeps rec, a record just committed as completed or read completed
// from the store.
func (c *Cache) Put(rec *idempotency.Record) {
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
