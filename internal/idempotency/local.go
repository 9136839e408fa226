package idempotency

import (
	"sync"
	"time"
)

// defaultLocalCacheSize is how many completed records an instance keeps in
// memory when Config.LocalCacheSize is zero: about 2 KB each with an
// order's answer, so some 8 MB of live heap (twice that at the garbage
// collector's peak). Retries come within seconds of the original, so the
// newest few thousand keys are the ones replays ask for.
const defaultLocalCacheSize = 4096

// localCache holds completed records this instance committed or read, so
// that a replay on the instance that stored the answer touches neither the
// database nor Redis. A completed record is immutable until it expires, so
// the copy can never disagree with the store; an entry is dropped at its
// record's expiry, and nothing that is not committed and completed enters.
// When full, an arbitrary entry makes room (a map's iteration order): the
// cache is an accelerator, and a miss only costs the path it saves.
type localCache struct {
	mu   sync.Mutex
	max  int
	recs map[string]*Record
}

func newLocalCache(size int) *localCache {
	if size < 0 {
		return nil
	}
	return &localCache{max: size, recs: make(map[string]*Record, min(size, 1024))}
}

func localKey(scope, key string) string { return scope + "\x00" + key }

// get returns the live completed record of the key, or nil.
func (c *localCache) get(scope, key string, now time.Time) *Record {
	if c == nil {
		return nil
	}
	k := localKey(scope, key)
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.recs[k]
	if rec != nil && !rec.ExpiresAt.After(now) {
		delete(c.recs, k)
		return nil
	}
	return rec
}

// put keeps rec, a record just committed as completed or read completed
// from the store.
func (c *localCache) put(rec *Record) {
	if c == nil || rec == nil || rec.State != StateCompleted || rec.Answer == nil {
		return
	}
	k := localKey(rec.Scope, rec.Key)
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
