package redisidem_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency/redisidem"
	"github.com/idemkeys/payments/internal/redisconn"
	"github.com/idemkeys/payments/internal/testkit"
)

// commandCounter counts the commands a client sends, pipelined ones included.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

func openLimiter(t *testing.T, url string, limit int) (*redisidem.Limiter, *commandCounter) {
	t.Helper()
	client, err := redisconn.Open(url, redisconn.Options{Timeout: 100 * time.Millisecond})
	require.NoError(t, err)
	counter := &commandCounter{}
	client.AddHook(counter)
	l := redisidem.NewLimiter(client, limit, time.Hour, 100*time.Millisecond)
	t.Cleanup(func() { l.Close(); _ = client.Close() })
	return l, counter
}

func allowed(t *testing.T, l *redisidem.Limiter, scope string, n int) int {
	t.Helper()
	ok := 0
	for range n {
		if _, yes := l.AllowNewKey(t.Context(), scope); yes {
			ok++
		}
	}
	return ok
}

// TestLimiterIsSharedThroughRedis: two instances share one quota once they
// have synced; deciding costs no Redis command.
func TestLimiterIsSharedThroughRedis(t *testing.T) {
	rs := testkit.StartRedis(t)
	a, _ := openLimiter(t, rs.URL(), 10)
	b, _ := openLimiter(t, rs.URL(), 10)

	// Deciding is local: no command on the request path. Counted on a
	// limiter whose sync loop is stopped, so that no background sync
	// (the ticker's, or the one a scope's first key asks for) is counted.
	quiet, countQuiet := openLimiter(t, rs.URL(), 10)
	quiet.Close()
	require.Equal(t, 6, allowed(t, quiet, "m0", 6))
	require.Zero(t, countQuiet.n.Load(), "six decisions sent commands of their own")

	require.Equal(t, 6, allowed(t, a, "m1", 6))
	require.NoError(t, a.Sync(t.Context()))
	// b's first key learns nothing yet; its sync learns a's six.
	require.Equal(t, 1, allowed(t, b, "m1", 1))
	require.NoError(t, b.Sync(t.Context()))
	require.Equal(t, 3, allowed(t, b, "m1", 10), "b takes what is left of the shared quota")
	retry, ok := b.AllowNewKey(t.Context(), "m1")
	require.False(t, ok)
	require.Greater(t, retry, time.Duration(0))
	require.NoError(t, b.Sync(t.Context()))
	require.NoError(t, a.Sync(t.Context()))
	require.Zero(t, allowed(t, a, "m1", 5), "a hears of b's keys")
	require.Equal(t, 10, allowed(t, a, "m2", 20), "per merchant")

	total, err := rs.Client(t).Get(t.Context(), limiterKey(time.Hour, "m1")).Int64()
	require.NoError(t, err)
	require.EqualValues(t, 10, total)
}

// TestLimiterWithoutRedisIsPerInstance: when Redis cannot answer, an
// instance still allows its own quota and no more: never unlimited.
func TestLimiterWithoutRedisIsPerInstance(t *testing.T) {
	rs := testkit.StartRedis(t)
	l, _ := openLimiter(t, rs.URL(), 5)
	rs.Kill()
	require.Equal(t, 5, allowed(t, l, "m1", 50))
	require.Error(t, l.Sync(t.Context()))
	require.Zero(t, allowed(t, l, "m1", 5))

	// A Redis that never answered at all: the same.
	dead, _ := openLimiter(t, "redis://"+testkit.FreeAddr(t)+"/0", 5)
	require.Equal(t, 5, allowed(t, dead, "m1", 50))
}

// limiterKey is the shared counter of scope in the current window.
func limiterKey(window time.Duration, scope string) string {
	return "rl:{" + scope + "}:" + itoa(time.Now().Truncate(window).UnixMilli())
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
