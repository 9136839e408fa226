package merchants

import (
	"sync"
	"time"
)

// keyCache maps API key hashes to merchant ids for a while. It is bounded:
// when full, an arbitrary entry makes room (Go's map iteration order is
// random), which is simple and good enough for a working set that is the
// number of live keys.
type keyCache struct {
	mu      sync.Mutex
	ttl     time.Duration
	max     int
	entries map[keyHash]cacheEntry
}

type cacheEntry struct {
	merchantID string
	expires    time.Time
}

func newKeyCache(ttl time.Duration, maxEntries int) *keyCache {
	return &keyCache{ttl: ttl, max: maxEntries, entries: make(map[keyHash]cacheEntry)}
}

func (c *keyCache) get(hash keyHash, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok {
		return "", false
	}
	if !now.Before(e.expires) {
		delete(c.entries, hash)
		return "", false
	}
	return e.merchantID, true
}

func (c *keyCache) put(hash keyHash, merchantID string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[hash]; !ok && len(c.entries) >= c.max {
		for victim := range c.entries {
			delete(c.entries, victim)
			break
		}
	}
	c.entries[hash] = cacheEntry{merchantID: merchantID, expires: now.Add(c.ttl)}
}

func (c *keyCache) drop(hash keyHash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, hash)
}
