// Package redisidem is the Redis adapter of the idempotency layer: a Cache
// of completed records with cross-instance wake-ups, and a Limiter of new
// keys. Redis accelerates; the Store stays the truth.
package redisidem

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/idemkeys/payments/internal/idempotency/seal"

	"github.com/redis/go-redis/v9"

	"github.com/idemkeys/payments/internal/idempotency"
)

// Cache is the idempotency.Cache on Redis (one node or a cluster).
//
// Keys are "idem:{<scope>}:<hash>": the braces are a Redis Cluster hash
// tag, so one merchant's keys live on one slot. The hash is an HMAC-SHA256
// of the scope and the client's key under a secret that every instance
// shares: whoever can read Redis (a replica, a backup, a MONITOR session)
// can neither confirm a guessed key ("order-1042") nor tell that two
// merchants used the same one, as an unkeyed hash would let them. The secret
// must be the same on every instance, or they would not find each other's
// entries and wake-ups. Completions are announced on one pub/sub channel
// that every instance listens to, carrying the scope and the same hash; a
// waiter registers locally for its key.
type Cache struct {
	client redis.UniversalClient
	log    *slog.Logger
	secret []byte

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	healthy bool
	// skipUntil: after a failure, requests skip Redis for a moment instead
	// of each paying the timeout against a Redis that is down or frozen.
	skipUntil time.Time

	cancel context.CancelFunc
	done   chan struct{}

	// timeout bounds every call of the port's (WithTimeout); the writes
	// run in the background, counted in work until Close.
	timeout time.Duration
	work    sync.WaitGroup

	// cipher, when set, encrypts cached bodies as the store encrypts them
	// at rest: turning encryption on must not leave a clear copy in Redis.
	cipher *seal.Cipher
}

// WithCipher makes the cache encrypt the bodies it holds with c, the cipher
// of the store. It returns the cache for chaining.
func (c *Cache) WithCipher(rc *seal.Cipher) *Cache {
	c.cipher = rc
	return c
}

// WithTimeout bounds each of the cache's calls for a request to d (default
// 150ms; set it to the client's own timeout). It returns the cache for
// chaining.
func (c *Cache) WithTimeout(d time.Duration) *Cache {
	if d > 0 {
		c.timeout = d
	}
	return c
}

// redisChannel carries "<scope>\x00<key hash>" for every completion.
const redisChannel = "idem:done"

// NewCache returns a cache over client whose key names are keyed by
// keySecret (shared by every instance; at least 16 bytes), and starts
// listening for completions until Close. It panics on a shorter secret: a
// wiring mistake must stop the process at start.
func NewCache(client redis.UniversalClient, keySecret []byte, log *slog.Logger) *Cache {
	if len(keySecret) < MinKeySecret {
		panic("redisidem: the key secret must be at least 16 bytes")
	}
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{client: client, log: log, secret: bytes.Clone(keySecret), waiters: map[string]map[chan struct{}]struct{}{}, healthy: true, cancel: cancel, done: make(chan struct{}), timeout: 150 * time.Millisecond}
	go c.listen(ctx)
	return c
}

// Close waits for the writes under way (each ends within the timeout),
// then stops listening.
func (c *Cache) Close() {
	c.work.Wait()
	c.cancel()
	<-c.done
}

// MinKeySecret is the shortest secret NewCache accepts, in bytes.
const MinKeySecret = 16

// keyHash names the key of scope in Redis: 128 bits of its keyed hash.
func (c *Cache) keyHash(scope, key string) string {
	mac := hmac.New(sha256.New, c.secret)
	mac.Write([]byte(scope))
	mac.Write([]byte{0})
	mac.Write([]byte(key))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

func (c *Cache) redisKey(scope, key string) string {
	return "idem:{" + scope + "}:" + c.keyHash(scope, key)
}

// cachedRecord is what Redis holds: enough to replay or refuse a mismatch.
// The stored headers are in Header; ContentType and Location repeat two of
// them for instances older than Header, which read only those two (and a
// newer instance reading an older entry finds them there).
type cachedRecord struct {
	Fingerprint string            `json:"fp"`
	Status      int               `json:"st"`
	Header      map[string]string `json:"h,omitempty"`
	ContentType string            `json:"ct,omitempty"`
	Location    string            `json:"loc,omitempty"`
	Body        []byte            `json:"body"`
	KeyID       string            `json:"kid,omitempty"`
	ExpiresAt   time.Time         `json:"exp"`
	Sent        []byte            `json:"sent,omitempty"` // Record.Sent, if known
}

// errSkipped: Redis failed a moment ago and is not asked again yet.
var errSkipped = errors.New("redis skipped after a recent failure")

// skipping reports whether Redis failed recently enough to be left alone.
func (c *Cache) skipping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Before(c.skipUntil)
}

// Get implements idempotency.Cache: GetCompleted within the timeout, any
// failure a miss.
func (c *Cache) Get(ctx context.Context, scope, key string, _ time.Time) *idempotency.Record {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rec, err := c.GetCompleted(ctx, scope, key)
	if err != nil {
		return nil
	}
	return rec
}

// Keep implements idempotency.Cache: PutCompleted of a completed record,
// off the caller's path.
func (c *Cache) Keep(rec *idempotency.Record) {
	if rec.State == idempotency.StateCompleted && rec.Answer != nil {
		c.background(func(ctx context.Context) error { return c.PutCompleted(ctx, rec) })
	}
}

// Changed implements idempotency.Cache: Notify, off the caller's path.
func (c *Cache) Changed(scope, key string) {
	c.background(func(ctx context.Context) error { return c.Notify(ctx, scope, key) })
}

// background runs a write within the timeout, off the caller's path; its
// failure is the Store's to make up for (observe logs an outage).
func (c *Cache) background(write func(ctx context.Context) error) {
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		_ = write(ctx)
	}()
}

// GetCompleted returns the cached completed record, or ErrNotFound.
func (c *Cache) GetCompleted(ctx context.Context, scope, key string) (*idempotency.Record, error) {
	if c.skipping() {
		return nil, errSkipped
	}
	b, err := c.client.Get(ctx, c.redisKey(scope, key)).Bytes()
	if errors.Is(err, redis.Nil) {
		c.observe(nil)
		return nil, idempotency.ErrNotFound
	}
	c.observe(err)
	if err != nil {
		return nil, err
	}
	var cr cachedRecord
	if err := json.Unmarshal(b, &cr); err != nil {
		return nil, err
	}
	if !time.Now().Before(cr.ExpiresAt) {
		return nil, idempotency.ErrNotFound
	}
	if cr.KeyID != "" {
		if c.cipher == nil {
			return nil, idempotency.ErrNotFound
		}
		if cr.Body, err = c.cipher.Open(scope, key, cr.KeyID, cr.Body); err != nil {
			return nil, err
		}
	}
	h := make(http.Header, max(len(cr.Header), 2))
	for name, v := range cr.Header {
		h.Set(name, v)
	}
	if cr.Header == nil {
		if cr.ContentType != "" {
			h.Set("Content-Type", cr.ContentType)
		}
		if cr.Location != "" {
			h.Set("Location", cr.Location)
		}
	}
	rec := &idempotency.Record{
		Scope: scope, Key: key, Fingerprint: cr.Fingerprint, State: idempotency.StateCompleted,
		Answer:    &idempotency.Answer{Status: cr.Status, Header: h, Body: cr.Body, Final: true},
		ExpiresAt: cr.ExpiresAt,
	}
	if len(cr.Sent) == len(rec.Sent) {
		rec.Sent = [len(rec.Sent)]byte(cr.Sent)
	}
	return rec, nil
}

// PutCompleted caches rec until its record expires. The entry expires with the record (a
// second early, to absorb clock skew), so the cache never outlives what the
// database holds.
func (c *Cache) PutCompleted(ctx context.Context, rec *idempotency.Record) error {
	if c.skipping() {
		return errSkipped
	}
	ttl := time.Until(rec.ExpiresAt) - time.Second
	if ttl <= 0 || rec.Answer == nil {
		return nil
	}
	a := rec.Answer
	cr := cachedRecord{
		Fingerprint: rec.Fingerprint, Status: a.Status, Header: make(map[string]string, len(a.Header)),
		ContentType: a.Header.Get("Content-Type"), Location: a.Header.Get("Location"), Body: a.Body, ExpiresAt: rec.ExpiresAt,
	}
	if rec.Sent != ([len(rec.Sent)]byte{}) {
		cr.Sent = rec.Sent[:]
	}
	for name := range a.Header {
		cr.Header[name] = a.Header.Get(name)
	}
	if c.cipher != nil {
		kid, sealed, err := c.cipher.Seal(rec.Scope, rec.Key, a.Body)
		if err != nil {
			return err
		}
		cr.KeyID, cr.Body = kid, sealed
	}
	b, err := json.Marshal(cr)
	if err != nil {
		return err
	}
	err = c.client.Set(ctx, c.redisKey(rec.Scope, rec.Key), b, ttl).Err()
	c.observe(err)
	return err
}

// Notify wakes the key's waiters on every instance.
func (c *Cache) Notify(ctx context.Context, scope, key string) error {
	if c.skipping() {
		return errSkipped
	}
	err := c.client.Publish(ctx, redisChannel, scope+"\x00"+c.keyHash(scope, key)).Err()
	c.observe(err)
	return err
}

// Subscribe implements idempotency.Cache: a waiter registered here, woken
// by any instance's Notify.
func (c *Cache) Subscribe(scope, key string) (<-chan struct{}, func()) {
	id := scope + "\x00" + c.keyHash(scope, key)
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	if c.waiters[id] == nil {
		c.waiters[id] = map[chan struct{}]struct{}{}
	}
	c.waiters[id][ch] = struct{}{}
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.waiters[id], ch)
		if len(c.waiters[id]) == 0 {
			delete(c.waiters, id)
		}
		c.mu.Unlock()
	}
}

// listen relays completions to local waiters. go-redis reconnects the
// subscription by itself after Redis comes back.
func (c *Cache) listen(ctx context.Context) {
	defer close(c.done)
	sub := c.client.Subscribe(ctx, redisChannel)
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			c.mu.Lock()
			for w := range c.waiters[msg.Payload] {
				select {
				case w <- struct{}{}:
				default:
				}
			}
			c.mu.Unlock()
		}
	}
}

// Ping reports whether Redis answers (for /readyz). It always asks, so it
// is also how a recovered Redis is noticed.
func (c *Cache) Ping(ctx context.Context) error {
	err := c.client.Ping(ctx).Err()
	c.observe(err)
	return err
}

// observe logs the moments Redis goes away and comes back, once each, so a
// Redis outage is visible without a log line per request.
func (c *Cache) observe(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.skipUntil = time.Now().Add(time.Second)
	}
	switch {
	case err != nil && c.healthy:
		c.healthy = false
		c.log.Warn("redis unavailable: serving from PostgreSQL alone until it returns", "error", err)
	case err == nil && !c.healthy:
		c.healthy = true
		c.log.Info("redis is back: replay cache and wake-ups resumed")
	}
}
