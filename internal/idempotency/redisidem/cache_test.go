package redisidem_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/idempotency/seal"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/redisidem"
	"github.com/idemkeys/payments/internal/redisconn"
	"github.com/idemkeys/payments/internal/testkit"
)

// testKeySecret keys the Redis names of the tests' caches.
var testKeySecret = []byte("a-redis-key-secret-for-tests")

// TestRedisNamesAreKeyed: the name of a key's entry is no unkeyed hash of
// the key, differs between merchants for the same key and between secrets,
// and is the same on every instance with the same secret, which find each
// other's entries.
func TestRedisNamesAreKeyed(t *testing.T) {
	rs := testkit.StartRedis(t)
	open := func(secret string) *redisidem.Cache {
		client, err := redisconn.Open(rs.URL(), redisconn.Options{Timeout: 100 * time.Millisecond})
		require.NoError(t, err)
		c := redisidem.NewCache(client, []byte(secret), nil)
		t.Cleanup(func() { c.Close(); _ = client.Close() })
		return c
	}
	a, b, other := open("one-shared-secret-0123"), open("one-shared-secret-0123"), open("another-secret-456789")
	const key = "order-1042"
	name := a.RedisKey("m1", key)
	require.True(t, strings.HasPrefix(name, "idem:{m1}:"), name)
	suffix := strings.TrimPrefix(name, "idem:{m1}:")
	require.Len(t, suffix, 32)
	plain := sha256.Sum256([]byte(key))
	require.NotContains(t, hex.EncodeToString(plain[:]), suffix, "an unkeyed hash lets a reader of Redis confirm a guess")
	require.NotContains(t, name, key)
	require.NotEqual(t, suffix, strings.TrimPrefix(a.RedisKey("m2", key), "idem:{m2}:"), "two merchants with one key look alike")
	require.Equal(t, name, b.RedisKey("m1", key))
	require.NotEqual(t, name, other.RedisKey("m1", key))

	rec := &idempotency.Record{
		Scope: "m1", Key: key, Fingerprint: "fp", State: idempotency.StateCompleted,
		Answer:    &idempotency.Answer{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"a":1}`), Final: true},
		ExpiresAt: time.Now().Add(time.Hour),
	}
	require.NoError(t, a.PutCompleted(t.Context(), rec))
	_, err := b.GetCompleted(t.Context(), "m1", key)
	require.NoError(t, err, "instances with one secret share the cache")
	_, err = other.GetCompleted(t.Context(), "m1", key)
	require.ErrorIs(t, err, idempotency.ErrNotFound)
	require.Panics(t, func() { redisidem.NewCache(nil, []byte("short"), nil) })
}

func TestRedisCache(t *testing.T) {
	rs := testkit.StartRedis(t)
	open := func() *redisidem.Cache {
		client, err := redisconn.Open(rs.URL(), redisconn.Options{Timeout: 100 * time.Millisecond})
		require.NoError(t, err)
		c := redisidem.NewCache(client, testKeySecret, nil)
		t.Cleanup(func() { c.Close(); _ = client.Close() })
		return c
	}
	a, b := open(), open() // two instances
	ctx := context.Background()

	t.Run("a completed record round-trips until it expires", func(t *testing.T) {
		_, err := a.GetCompleted(ctx, "m1", "k1")
		require.ErrorIs(t, err, idempotency.ErrNotFound)
		rec := &idempotency.Record{
			Scope: "m1", Key: "k1", Fingerprint: "fp", State: idempotency.StateCompleted,
			Answer: &idempotency.Answer{Status: 201, Header: http.Header{
				"Content-Type": {"application/json"}, "Location": {"/x"}, "Etag": {`"1"`},
			}, Body: []byte(`{"a":1}`), Final: true},
			ExpiresAt: time.Now().Add(time.Hour), Sent: sha256.Sum256([]byte("the request as sent")),
		}
		require.NoError(t, a.PutCompleted(ctx, rec))
		got, err := b.GetCompleted(ctx, "m1", "k1")
		require.NoError(t, err)
		require.Equal(t, rec.Answer, got.Answer)
		require.Equal(t, "fp", got.Fingerprint)
		require.Equal(t, rec.Sent, got.Sent, "the digest of the bytes sent travels too: their retry is not canonicalized")
		_, err = b.GetCompleted(ctx, "m2", "k1")
		require.ErrorIs(t, err, idempotency.ErrNotFound, "scoped to the merchant")

		soon := *rec
		soon.Key, soon.ExpiresAt = "k-soon", time.Now().Add(500*time.Millisecond)
		require.NoError(t, a.PutCompleted(ctx, &soon))
		_, err = a.GetCompleted(ctx, "m1", "k-soon")
		require.ErrorIs(t, err, idempotency.ErrNotFound, "an entry is never kept past the record's expiry")
	})

	t.Run("entries read across versions during a rolling deploy", func(t *testing.T) {
		// An entry an older instance wrote: Content-Type and Location only.
		old := `{"fp":"fp","st":201,"ct":"application/json","loc":"/v1/orders/ord_1","body":"e30=","exp":"` +
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano) + `"}`
		client, err := redisconn.Open(rs.URL(), redisconn.Options{Timeout: time.Second})
		require.NoError(t, err)
		defer client.Close()
		require.NoError(t, client.Set(ctx, a.RedisKey("m1", "old"), old, time.Hour).Err())
		got, err := a.GetCompleted(ctx, "m1", "old")
		require.NoError(t, err)
		require.Equal(t, http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/orders/ord_1"}}, got.Answer.Header)
		require.Equal(t, []byte(`{}`), got.Answer.Body)

		// An entry this version writes still holds the two members an
		// older instance reads.
		rec := &idempotency.Record{
			Scope: "m1", Key: "new", Fingerprint: "fp", State: idempotency.StateCompleted,
			Answer: &idempotency.Answer{Status: 201, Header: http.Header{
				"Content-Type": {"application/json"}, "Location": {"/v1/orders/ord_2"}, "Etag": {`"1"`},
			}, Body: []byte(`{}`), Final: true},
			ExpiresAt: time.Now().Add(time.Hour),
		}
		require.NoError(t, a.PutCompleted(ctx, rec))
		raw, err := client.Get(ctx, a.RedisKey("m1", "new")).Result()
		require.NoError(t, err)
		var entry struct {
			CT  string `json:"ct"`
			Loc string `json:"loc"`
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &entry))
		require.Equal(t, "application/json", entry.CT)
		require.Equal(t, "/v1/orders/ord_2", entry.Loc)
	})

	t.Run("a notify on one instance wakes a waiter on another", func(t *testing.T) {
		ch, stop := b.Subscribe("m1", "k-wait")
		defer stop()
		other, stopOther := b.Subscribe("m1", "k-other")
		defer stopOther()
		// The subscription connects asynchronously: notify until heard.
		deadline := time.After(5 * time.Second)
		for {
			require.NoError(t, a.Notify(ctx, "m1", "k-wait"))
			select {
			case <-ch:
				select {
				case <-other:
					t.Fatal("another key's waiter was woken")
				default:
				}
				return
			case <-time.After(50 * time.Millisecond):
			case <-deadline:
				t.Fatal("the waiter was never woken")
			}
		}
	})

	t.Run("down: an error, never a miss", func(t *testing.T) {
		rs.Kill()
		_, err := a.GetCompleted(ctx, "m1", "k1")
		require.Error(t, err)
		require.NotErrorIs(t, err, idempotency.ErrNotFound, "a cache that cannot answer must not claim the key is new")
		require.Error(t, a.Ping(ctx))
	})
}

// TestRedisCacheOnACluster runs the cache, the wake-ups and the limiter on a
// three-node Redis Cluster: one merchant's keys share a slot (hash tags),
// and pub/sub reaches every node.
func TestRedisCacheOnACluster(t *testing.T) {
	testkit.EndToEnd(t)
	cluster := testkit.StartRedisCluster(t)
	open := func() *redisidem.Cache {
		client, err := redisconn.Open(cluster.URL(), redisconn.Options{Timeout: time.Second})
		require.NoError(t, err)
		c := redisidem.NewCache(client, testKeySecret, nil)
		t.Cleanup(func() { c.Close(); _ = client.Close() })
		return c
	}
	a, b := open(), open()
	ctx := context.Background()
	for _, m := range []string{"m1", "m2", "m3", "m4"} {
		rec := &idempotency.Record{
			Scope: m, Key: "k", Fingerprint: "fp", State: idempotency.StateCompleted,
			Answer: &idempotency.Answer{Status: 201, Header: http.Header{}, Body: []byte(m), Final: true}, ExpiresAt: time.Now().Add(time.Hour),
		}
		require.NoError(t, a.PutCompleted(ctx, rec))
		got, err := b.GetCompleted(ctx, m, "k")
		require.NoError(t, err)
		require.Equal(t, []byte(m), got.Answer.Body)
	}

	ch, stop := b.Subscribe("m1", "k-wait")
	defer stop()
	deadline := time.After(10 * time.Second)
	for woken := false; !woken; {
		require.NoError(t, a.Notify(ctx, "m1", "k-wait"))
		select {
		case <-ch:
			woken = true
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("a waiter on the cluster was never woken")
		}
	}

	client, err := redisconn.Open(cluster.URL(), redisconn.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer client.Close()
	limiter := redisidem.NewLimiter(client, 2, time.Hour, 0)
	defer limiter.Close()
	for range 2 {
		_, ok := limiter.AllowNewKey(ctx, "m1")
		require.True(t, ok)
	}
	retry, ok := limiter.AllowNewKey(ctx, "m1")
	require.False(t, ok)
	require.Greater(t, retry, time.Duration(0))
	_, ok = limiter.AllowNewKey(ctx, "m2")
	require.True(t, ok, "per merchant")
	require.NoError(t, limiter.Sync(ctx), "the counters of several slots in one pipeline")
}

func TestRedisCacheEncryptsBodiesWhenTheStoreDoes(t *testing.T) {
	rs := testkit.StartRedis(t)
	client, err := redisconn.Open(rs.URL(), redisconn.Options{Timeout: time.Second})
	require.NoError(t, err)
	cipher, err := seal.New(map[string][]byte{"k1": make([]byte, 32)}, "k1")
	require.NoError(t, err)
	c := redisidem.NewCache(client, testKeySecret, nil).WithCipher(cipher)
	t.Cleanup(func() { c.Close(); _ = client.Close() })
	ctx := context.Background()
	secret := []byte(`{"card_holder":"VERY SECRET NAME"}`)
	require.NoError(t, c.PutCompleted(ctx, &idempotency.Record{
		Scope: "m1", Key: "enc", Fingerprint: "fp", State: idempotency.StateCompleted,
		Answer: &idempotency.Answer{Status: 201, Body: secret, Final: true}, ExpiresAt: time.Now().Add(time.Hour),
	}))
	keys, err := rs.Client(t).Keys(ctx, "idem:*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	raw, err := rs.Client(t).Get(ctx, keys[0]).Bytes()
	require.NoError(t, err)
	var held struct {
		Body []byte `json:"body"`
	}
	require.NoError(t, json.Unmarshal(raw, &held))
	require.NotEmpty(t, held.Body)
	require.NotContains(t, string(held.Body), "VERY SECRET NAME", "Redis holds ciphertext")
	got, err := c.GetCompleted(ctx, "m1", "enc")
	require.NoError(t, err)
	require.Equal(t, secret, got.Answer.Body)
}

// TestCloseWaitsForBackgroundWork: Keep and Changed write off the caller's
// path; Close returns once the writes under way are done, and a write that
// Redis holds is stopped at the cache's timeout.
func TestCloseWaitsForBackgroundWork(t *testing.T) {
	rs := testkit.StartRedis(t)
	open := func(timeout time.Duration) (*redisidem.Cache, *holdingHook) {
		client, err := redisconn.Open(rs.URL(), redisconn.Options{Timeout: time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() })
		hold := &holdingHook{release: make(chan struct{}), entered: make(chan struct{}, 10)}
		client.AddHook(hold)
		return redisidem.NewCache(client, testKeySecret, nil).WithTimeout(timeout), hold
	}
	rec := func(key string) *idempotency.Record {
		return &idempotency.Record{Scope: "m1", Key: key, Fingerprint: "fp", State: idempotency.StateCompleted,
			Answer: &idempotency.Answer{Status: 201, Body: []byte(`{}`), Final: true}, ExpiresAt: time.Now().Add(time.Hour)}
	}

	c, hold := open(time.Minute)
	c.Keep(rec("close-1"))
	<-hold.entered // the write is under way, held
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while the cache write still ran")
	case <-time.After(20 * time.Millisecond):
	}
	hold.release <- struct{}{}
	<-closed
	reader := redisidem.NewCache(rsClient(t, rs), testKeySecret, nil)
	defer reader.Close()
	got, err := reader.GetCompleted(t.Context(), "m1", "close-1")
	require.NoError(t, err, "the write Close waited for is done")
	require.Equal(t, "fp", got.Fingerprint)

	c, hold = open(50 * time.Millisecond)
	c.Keep(rec("close-2"))
	<-hold.entered
	c.Close() // returns: the held write is stopped at the timeout
}

// rsClient is a client of rs, closed with the test.
func rsClient(t *testing.T, rs *testkit.Redis) redis.UniversalClient {
	client, err := redisconn.Open(rs.URL(), redisconn.Options{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// holdingHook holds every SET until released or its context ends.
type holdingHook struct {
	release chan struct{}
	entered chan struct{}
}

func (h *holdingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "set" {
			h.entered <- struct{}{}
			select {
			case <-h.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}
func (h *holdingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
