package redisidem

import "context"

// RedisKey is the name of the entry of key in scope, for tests that look at
// Redis itself.
func (c *Cache) RedisKey(scope, key string) string { return c.redisKey(scope, key) }

// Sync runs the limiter's sync now, for tests that would otherwise wait for
// its loop.
func (l *Limiter) Sync(ctx context.Context) error { return l.sync(ctx) }
