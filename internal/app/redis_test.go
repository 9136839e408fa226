package app_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

func readyz(t *testing.T, base string) (int, map[string]any) {
	t.Helper()
	a := apptest.Call(t, "GET", base+"/readyz", "", "", "")
	return a.Status, a.JSON(t)
}

// TestRedisAcceleratesButIsNeverTheTruth runs the API with a private Redis,
// then kills, restarts, flushes and freezes that Redis under requests: every
// answer stays exactly-once, through PostgreSQL alone when Redis is gone.
func TestRedisAcceleratesButIsNeverTheTruth(t *testing.T) {
	rs := testkit.StartRedis(t)
	dbURL := testkit.DatabaseURL(t, database.Postgres)
	api := apptest.Start(t, dbURL, apptest.Env("REDIS_URL="+rs.URL(), "REDIS_TIMEOUT=100ms"))
	ctx := context.Background()

	status, body := readyz(t, api.URL)
	require.Equal(t, 200, status)
	require.Equal(t, "ok", body["status"])
	require.Equal(t, "up", body["checks"].(map[string]any)["redis"])

	created := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "redis-1", apptest.OrderBody)
	require.Equal(t, 201, created.Status)
	testkit.Eventually(t, 5*time.Second, "the completed record is cached", func() bool {
		keys, err := rs.Client(t).Keys(ctx, "idem:{mch_acme}:*").Result()
		return err == nil && len(keys) == 1
	})
	keys, _ := rs.Client(t).Keys(ctx, "idem:{mch_acme}:*").Result()
	ttl, err := rs.Client(t).PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Duration(0))
	require.LessOrEqual(t, ttl, 24*time.Hour, "the cache entry expires no later than the record")
	require.NotContains(t, keys[0], "redis-1", "the client's key is hashed in Redis")

	replayed := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "redis-1", apptest.OrderBody)
	require.Equal(t, "true", replayed.Header.Get("Idempotent-Replayed"))
	require.Equal(t, created.Body, replayed.Body)
	mismatch := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "redis-1", strings.Replace(apptest.OrderBody, "cus_1", "cus_9", 1))
	require.Equal(t, 422, mismatch.Status)

	t.Run("flushed: replays come from PostgreSQL", func(t *testing.T) {
		require.NoError(t, rs.Client(t).FlushAll(ctx).Err())
		again := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "redis-1", apptest.OrderBody)
		require.Equal(t, created.Body, again.Body)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	})

	t.Run("killed: degraded, still exactly once", func(t *testing.T) {
		rs.Kill()
		status, body := readyz(t, api.URL)
		require.Equal(t, 200, status)
		require.Equal(t, "degraded", body["status"])
		require.Equal(t, "down", body["checks"].(map[string]any)["redis"])
		require.Equal(t, "up", body["checks"].(map[string]any)["database"])

		var wg sync.WaitGroup
		bodies := make([]string, 20)
		for i := range bodies {
			wg.Go(func() {
				a := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "redis-down", apptest.OrderBody)
				require.Equal(t, 201, a.Status, string(a.Body))
				bodies[i] = string(a.Body)
			})
		}
		wg.Wait()
		for _, b := range bodies {
			require.Equal(t, bodies[0], b)
		}
		again := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "redis-1", apptest.OrderBody)
		require.Equal(t, created.Body, again.Body)
		require.EqualValues(t, 2, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"))
	})

	t.Run("restarted: recovers by itself", func(t *testing.T) {
		require.NoError(t, rs.Restart(10*time.Second))
		testkit.Eventually(t, 10*time.Second, "readyz ok again", func() bool {
			status, body := readyz(t, api.URL)
			return status == 200 && body["status"] == "ok"
		})
		a := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "redis-back", apptest.OrderBody)
		require.Equal(t, 201, a.Status)
		testkit.Eventually(t, 5*time.Second, "cached again", func() bool {
			n, err := rs.Client(t).DBSize(ctx).Result()
			return err == nil && n >= 1
		})
	})

	t.Run("frozen: requests fall back within the timeout", func(t *testing.T) {
		rs.Pause()
		defer rs.Resume()
		a := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "redis-frozen", apptest.OrderBody)
		require.Equal(t, 201, a.Status)
		b := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "redis-frozen", apptest.OrderBody)
		require.Equal(t, a.Body, b.Body)
		require.EqualValues(t, 4, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"))
	})
}

// TestDuplicatesAcrossInstancesSeeTheResult runs two API instances on one
// database and one Redis; a slow payment starts on one, duplicates arrive on
// both, and every one of them gets the original's result.
func TestDuplicatesAcrossInstancesSeeTheResult(t *testing.T) {
	rs := testkit.StartRedis(t)
	w := apptest.Start(t, testkit.DatabaseURL(t, database.Postgres), apptest.WithProvider(provider.Config{SlowDelay: time.Second, DuplicateWebhookRate: -1}), apptest.Env("REDIS_URL="+rs.URL(), "IDEMPOTENCY_WAIT=10s"))
	second := apptest.StartReplica(t, w, apptest.Env("REDIS_URL="+rs.URL(), "IDEMPOTENCY_WAIT=10s"))

	order := w.CreateOrder(t, "sk_test_acme")
	key := apptest.NewKey()
	var wg sync.WaitGroup
	answers := make([]apptest.Answer, 20)
	for i := range answers {
		base := w.URL
		if i%2 == 1 {
			base = second.URL
		}
		wg.Go(func() {
			answers[i] = apptest.Call(t, "POST", base+"/v1/orders/"+order+"/payments", "sk_test_acme", key, `{"payment_method":"pm_fault_slow"}`)
		})
	}
	wg.Wait()
	for _, a := range answers {
		require.Equal(t, 201, a.Status, string(a.Body))
		require.Equal(t, answers[0].Body, a.Body)
	}
	paymentID := answers[0].JSON(t)["id"].(string)
	require.Len(t, w.Charges(t, paymentID), 1)
}

func TestRateLimitOnNewKeys(t *testing.T) {
	rs := testkit.StartRedis(t)
	dbURL := testkit.DatabaseURL(t, database.SQLite)
	api := apptest.Start(t, dbURL, apptest.Env("REDIS_URL="+rs.URL(), "RATE_LIMIT_NEW_KEYS=3", "RATE_LIMIT_WINDOW=1h"))
	for i := range 3 {
		require.Equal(t, 201, apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "rl-"+string(rune('a'+i)), apptest.OrderBody).Status)
	}
	limited := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "rl-d", apptest.OrderBody)
	require.Equal(t, 429, limited.Status)
	require.Equal(t, "rate_limited", limited.JSON(t)["code"])
	require.NotEmpty(t, limited.Header.Get("Retry-After"))
	require.EqualValues(t, 3, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"), "a limited request does nothing")

	replay := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "rl-a", apptest.OrderBody)
	require.Equal(t, 201, replay.Status, "retries of existing keys are never limited")
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 201, apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_globex", "rl-a", apptest.OrderBody).Status, "the limit is per merchant")
}

// TestRedisKilledMidLoad kills Redis while duplicates of many keys are in
// flight on two instances: every key still makes one order, and every
// answer for a key is the same.
func TestRedisKilledMidLoad(t *testing.T) {
	rs := testkit.StartRedis(t)
	dbURL := testkit.DatabaseURL(t, database.Postgres)
	a := apptest.Start(t, dbURL, apptest.Env("REDIS_URL="+rs.URL(), "REDIS_TIMEOUT=100ms", "IDEMPOTENCY_WAIT=10s"))
	b := apptest.Start(t, dbURL, apptest.Env("REDIS_URL="+rs.URL(), "REDIS_TIMEOUT=100ms", "IDEMPOTENCY_WAIT=10s"))

	const keys, copies = 30, 8
	bodies := make([][]string, keys)
	var wg sync.WaitGroup
	for k := range keys {
		bodies[k] = make([]string, copies)
		for c := range copies {
			base := a.URL
			if c%2 == 1 {
				base = b.URL
			}
			wg.Go(func() {
				if k == keys/2 && c == 0 {
					rs.Kill() // mid-load: half the keys are already done
				}
				r := apptest.Call(t, "POST", base+"/v1/orders", "sk_test_acme", fmt.Sprintf("mid-%d", k), apptest.OrderBody)
				require.Equal(t, 201, r.Status, string(r.Body))
				bodies[k][c] = string(r.Body)
			})
		}
		if k < keys/2 {
			time.Sleep(5 * time.Millisecond) // spread the load so the kill lands mid-way
		}
	}
	wg.Wait()
	for k := range keys {
		for c := range copies {
			require.Equal(t, bodies[k][0], bodies[k][c], "key %d", k)
		}
	}
	require.EqualValues(t, keys, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"), "one order per key")
}

// TestNewKeyLimitHoldsWithRedisDownAndWithout: the new-key limit answers
// 429 with Redis up, after Redis died, and with no Redis configured; never
// unlimited. Two instances sharing Redis share the quota, give or take what
// one starts before it first hears of the other (one sync).
func TestNewKeyLimitHoldsWithRedisDownAndWithout(t *testing.T) {
	testkit.EndToEnd(t)
	limited := func(t *testing.T, api *apptest.API, apiKey string, n int) (created, refused int) {
		t.Helper()
		for range n {
			r := apptest.Call(t, "POST", api.URL+"/v1/orders", apiKey, apptest.NewKey(), apptest.OrderBody)
			switch r.Status {
			case 201:
				created++
			case 429:
				refused++
				require.Equal(t, "rate_limited", r.JSON(t)["code"])
				require.NotEmpty(t, r.Header.Get("Retry-After"))
			default:
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
		}
		return created, refused
	}
	quota := []string{"RATE_LIMIT_NEW_KEYS=4", "RATE_LIMIT_WINDOW=1h"}

	t.Run("no redis: per instance", func(t *testing.T) {
		api := apptest.Start(t, testkit.DatabaseURL(t, database.SQLite), apptest.Env(quota...))
		created, refused := limited(t, api, "sk_test_acme", 10)
		require.Equal(t, 4, created)
		require.Equal(t, 6, refused)
	})

	t.Run("redis up, shared; then down, per instance", func(t *testing.T) {
		rs := testkit.StartRedis(t)
		dbURL := testkit.DatabaseURL(t, database.Postgres)
		env := append([]string{"REDIS_URL=" + rs.URL(), "REDIS_TIMEOUT=100ms"}, quota...)
		a := apptest.Start(t, dbURL, apptest.Env(env...))
		b := apptest.Start(t, dbURL, apptest.Env(env...))

		created, _ := limited(t, a, "sk_test_acme", 4)
		require.Equal(t, 4, created)
		// a adds its keys to the shared counter within one sync.
		testkit.Eventually(t, 30*time.Second, "a's keys reach the shared counter", func() bool {
			keys, err := rs.Client(t).Keys(t.Context(), "rl:{mch_acme}:*").Result()
			if err != nil || len(keys) != 1 {
				return false
			}
			n, err := rs.Client(t).Get(t.Context(), keys[0]).Int()
			return err == nil && n == 4
		})
		// b starts at most one key before its first sync tells it of a's four.
		total := created
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, r := limited(t, b, "sk_test_acme", 1)
			total += c
			if r == 1 {
				break
			}
			require.True(t, time.Now().Before(deadline), "b never heard of a's keys")
			// Slower than b's first sync, which its first key asks for.
			time.Sleep(200 * time.Millisecond)
		}
		require.LessOrEqual(t, total, 5, "the shared quota of 4, overshot by at most b's first key")
		require.EqualValues(t, total, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"))

		rs.Kill()
		created, refused := limited(t, a, "sk_test_globex", 10)
		require.Equal(t, 4, created, "Redis down: the per-instance quota, never unlimited")
		require.Equal(t, 6, refused)
	})
}
