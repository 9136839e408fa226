package idempotency

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter bounds how many new keys a merchant may start. Replays and waits
// on existing keys are never limited: a client retrying honestly is never
// refused.
type Limiter interface {
	// AllowNewKey reports whether the merchant may start one more key now,
	// and if not, when it may.
	AllowNewKey(ctx context.Context, merchantID string) (retryAfter time.Duration, ok bool)
}

// RedisLimiter is a fixed-window limit shared by every instance: one counter
// per merchant and window, "rl:{<merchant>}:<window start>". When Redis does
// not answer it lets the request through: the limit protects capacity, and
// correctness does not depend on it.
type RedisLimiter struct {
	client redis.UniversalClient
	limit  int64
	window time.Duration
}

// NewRedisLimiter allows limit new keys per merchant per window.
func NewRedisLimiter(client redis.UniversalClient, limit int, window time.Duration) *RedisLimiter {
	return &RedisLimiter{client: client, limit: int64(limit), window: window}
}

// AllowNewKey implements Limiter.
func (l *RedisLimiter) AllowNewKey(ctx context.Context, merchantID string) (time.Duration, bool) {
	now := time.Now()
	start := now.Truncate(l.window)
	key := "rl:{" + merchantID + "}:" + strconv.FormatInt(start.UnixMilli(), 10)
	ctx, cancel := context.WithTimeout(ctx, cacheTimeout)
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
