package redisidem

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter is a fixed-window limit shared by every instance: one counter
// per merchant and window, "rl:{<scope>}:<window start>". When Redis does
// not answer it lets the request through: the limit protects capacity, and
// correctness does not depend on it.
type Limiter struct {
	client  redis.UniversalClient
	limit   int64
	window  time.Duration
	timeout time.Duration
}

// NewLimiter allows limit new keys per merchant per window.
// A call gives up after timeout (zero: 150ms) and lets the request through.
func NewLimiter(client redis.UniversalClient, limit int, window, timeout time.Duration) *Limiter {
	if timeout <= 0 {
		timeout = 150 * time.Millisecond
	}
	return &Limiter{client: client, limit: int64(limit), window: window, timeout: timeout}
}

// AllowNewKey implements idempotency.Limiter.
func (l *Limiter) AllowNewKey(ctx context.Context, scope string) (time.Duration, bool) {
	now := time.Now()
	start := now.Truncate(l.window)
	key := "rl:{" + scope + "}:" + strconv.FormatInt(start.UnixMilli(), 10)
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	pipe := l.client.TxPipeline()
	incr := pipe.Incr(ctx, key)
	pipe.PExpire(ctx, key, l.window)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, true
	}
	if incr.Val() > l.limit {
		return start.Add(l.window).Sub(now), false
	}
	return 0, true
}
