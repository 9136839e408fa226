package redisidem

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter is a fixed-window limit on new keys per scope (merchant), shared
// by every instance through Redis without a Redis call on the request path.
//
// Each instance decides alone, from what it knows: the keys it started
// itself in the current window, plus the keys the other instances had
// started when it last heard from Redis. A background loop adds this
// instance's new keys to one counter per scope and window,
// "rl:{<scope>}:<window start>", every SyncInterval, in one pipelined round
// trip for all scopes, and reads back the total; a scope seen for the first
// time in a window asks for a sync at once, so that the instance soon
// knows what the others started. So a create pays nothing for the limit,
// and the shared limit may be overshot by what the instances start before
// they hear of each other: about one sync, a round trip after a scope's
// first key in a window, at most SyncInterval later.
//
// An instance never starts more than limit keys of a scope per window by
// itself: when Redis cannot answer, the others' counts stay at what was
// last heard for the window and are forgotten when it turns, which leaves
// the per-instance limit. Never unlimited.
type Limiter struct {
	client   redis.UniversalClient
	limit    int64
	window   time.Duration
	timeout  time.Duration
	interval time.Duration
	now      func() time.Time

	// syncing lets one sync run at a time: each reads the total as
	// covering every key no longer pending, which a sync still in flight
	// beside it would make false (the loop's own syncs never overlap; a
	// test's Sync beside the loop's would).
	syncing sync.Mutex

	mu     sync.Mutex
	scopes map[string]*scopeCount
	// kick asks the loop for a sync now (buffered: one request pending).
	kick chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

// scopeCount is what an instance knows of one scope in one window.
type scopeCount struct {
	start   time.Time
	own     int64 // keys this instance started
	pending int64 // of those, not yet added to Redis
	others  int64 // keys the other instances had started, as last heard
}

// SyncInterval bounds how often a Limiter talks to Redis: a tenth of the
// window, at most 100 ms and at least 10 ms.
func SyncInterval(window time.Duration) time.Duration {
	return min(max(window/10, 10*time.Millisecond), 100*time.Millisecond)
}

// NewLimiter allows limit new keys per scope per window and starts syncing
// with Redis until Close. A sync gives up after timeout (zero: 150ms).
func NewLimiter(client redis.UniversalClient, limit int, window, timeout time.Duration) *Limiter {
	if timeout <= 0 {
		timeout = 150 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Limiter{
		client: client, limit: int64(limit), window: window, timeout: timeout, interval: SyncInterval(window),
		now: time.Now, scopes: map[string]*scopeCount{}, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}),
	}
	go l.run(ctx)
	return l
}

// Close stops syncing; keys started since the last sync are not added.
func (l *Limiter) Close() {
	l.cancel()
	<-l.done
}

// AllowNewKey implements locallimit.Quota. It never calls Redis.
func (l *Limiter) AllowNewKey(_ context.Context, scope string) (time.Duration, bool) {
	now := l.now()
	start := now.Truncate(l.window)
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.scopes[scope]
	if s == nil || !s.start.Equal(start) {
		s = &scopeCount{start: start}
		l.scopes[scope] = s
		// Nothing known yet of the others' keys in this window.
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	if s.own >= l.limit || s.own+s.others >= l.limit {
		return start.Add(l.window).Sub(now), false
	}
	s.own++
	s.pending++
	return 0, true
}

func (l *Limiter) run(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = l.sync(ctx)
		case <-l.kick:
			_ = l.sync(ctx)
		}
	}
}

// sync adds this instance's new keys to the shared counters and learns the
// others', in one round trip; the loop calls it every SyncInterval (tests,
// through export_test.go, to skip the wait). On an error the keys stay
// pending for the next sync.
func (l *Limiter) sync(ctx context.Context) error {
	l.syncing.Lock()
	defer l.syncing.Unlock()
	start := l.now().Truncate(l.window)
	type flush struct {
		scope string
		s     *scopeCount
		n     int64
		incr  *redis.IntCmd
	}
	var batch []flush
	l.mu.Lock()
	for scope, s := range l.scopes {
		switch {
		case !s.start.Equal(start):
			// A past window: its counter no longer decides anything.
			delete(l.scopes, scope)
		case s.own > 0:
			// Scopes with no new key still learn the others' count.
			batch = append(batch, flush{scope: scope, s: s, n: s.pending})
			s.pending = 0
		}
	}
	l.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	window := strconv.FormatInt(start.UnixMilli(), 10)
	pipe := l.client.Pipeline()
	for i := range batch {
		key := "rl:{" + batch[i].scope + "}:" + window
		batch[i].incr = pipe.IncrBy(ctx, key, batch[i].n)
		// Twice the window: a slow clock on one instance still finds it.
		pipe.PExpire(ctx, key, 2*l.window)
	}
	_, err := pipe.Exec(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range batch {
		if f.incr.Err() != nil {
			f.s.pending += f.n
			continue
		}
		// Every key this instance added so far is in the total.
		added := f.s.own - f.s.pending
		f.s.others = max(f.incr.Val()-added, 0)
	}
	return err
}
