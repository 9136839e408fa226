package ginidem_test

// Benchmarks of what the middleware adds to a keyed request. Run them with
//
//	go test -run '^$' -bench . -benchmem -count 5 ./internal/idempotency/ginidem
//
// and compare runs with benchstat. They go through a real Gin engine and a
// real store, as a request does; BenchmarkBaseline is the same engine and
// handler without the middleware, so the difference is the middleware's own
// cost.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/gormstore/gormtest"
	"github.com/idemkeys/payments/internal/idempotency/localcache"
	"github.com/idemkeys/payments/internal/idempotency/redisidem"
	"github.com/idemkeys/payments/internal/redisconn"
	"github.com/idemkeys/payments/internal/testkit"
)

// orderBody is a create-order request with n items; nested adds metadata
// with objects and arrays inside, which the orders API does not accept but
// the fingerprint must still spell canonically.
func orderBody(n int, nested bool) []byte {
	var sb strings.Builder
	sb.WriteString(`{"customer_id":"cus_8f14e45fceea167a","currency":"BRL","items":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"sku":"SKU-%05d","name":"Coffee beans, %d g","quantity":%d,"unit_amount":%d}`, i, 250+i, 1+i%5, 1250+i*10)
	}
	sb.WriteString(`]`)
	if nested {
		sb.WriteString(`,"metadata":{"channel":"web","campaign":{"id":"cmp_42","utm":{"source":"newsletter","medium":"email","terms":["coffee","beans","roast"]}},` +
			`"shipping":{"address":{"line1":"Rua Augusta, 1500","city":"São Paulo","postal_code":"01304-001","country":"BR"},"window":{"from":"09:00","to":"18:00"}},` +
			`"flags":[true,false,null],"score":0.25,"notes":"leave at the door \u2014 ring twice"}`)
	}
	sb.WriteString(`}`)
	return []byte(sb.String())
}

// benchResponse is the fixed answer of the benchmark handler, about the size
// of a created order.
var benchResponse = []byte(`{"id":"ord_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D","object":"order","customer_id":"cus_8f14e45fceea167a",` +
	`"currency":"BRL","items":[{"sku":"SKU-00000","name":"Coffee beans, 250 g","quantity":1,"unit_amount":1250}],` +
	`"amount_total":1250,"status":"pending_payment","metadata":{},"shipping_address":null}`)

// benchCreateOrder reads the body as a handler does and answers 201. It
// writes no rows, so a new key costs what the middleware itself does in the
// database: begin, insert the record, commit.
func benchCreateOrder(c *gin.Context) (idempotency.Answer, error) {
	if _, err := io.Copy(io.Discard, c.Request.Body); err != nil {
		return idempotency.Answer{}, err
	}
	return idempotency.Answer{Status: http.StatusCreated, Header: http.Header{
		"Content-Type": {"application/json"}, "Location": {"/v1/orders/ord_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"},
	}, Body: benchResponse, Final: true}, nil
}

// newBenchEngine mounts POST /v1/orders, behind an Atomic Keeper over a real
// database of the dialect when dialect is not empty, and with cache in
// front when it is not nil.
func newBenchEngine(b *testing.B, dialect string, cache idempotency.Cache, storeOpts ...gormstore.Option) *gin.Engine {
	b.Helper()
	gin.SetMode(gin.TestMode)
	r := gin.New()
	if dialect == "" {
		r.POST("/v1/orders", func(c *gin.Context) {
			a, err := benchCreateOrder(c)
			if err != nil {
				a = testAnswer(c, err)
			}
			ginidem.Write(c, a)
		})
		return r
	}
	store := gormstore.New(gormtest.Open(b, dialect), storeOpts...)
	keeper := idempotency.New(store, idempotency.Config{Transactor: store,
		Cache: localcache.New(localcache.DefaultSize, cache)})
	mw := ginidem.New(keeper, ginidem.Options{Scope: func(*gin.Context) string { return "m1" }, Answer: testAnswer})
	r.POST("/v1/orders", mw.Atomic(benchCreateOrder))
	return r
}

// benchClient sends the same request again and again, reusing it so that
// the figures show the server's allocations rather than the test's.
type benchClient struct {
	engine *gin.Engine
	req    *http.Request
	body   rewindBody
	data   []byte
	key    []string
}

// rewindBody is a request body that can be read again after a Reset.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

func newBenchClient(engine *gin.Engine, body []byte) *benchClient {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/orders", nil)
	req.Header.Set("Content-Type", "application/json")
	bc := &benchClient{engine: engine, req: req, data: body, key: []string{""}}
	req.Header[idempotency.HeaderKey] = bc.key
	return bc
}

// post sends the request under key and returns the answer.
func (bc *benchClient) post(key string) *httptest.ResponseRecorder {
	bc.key[0] = key
	bc.body.Reset(bc.data)
	bc.req.Body = &bc.body
	bc.req.ContentLength = int64(len(bc.data))
	w := httptest.NewRecorder()
	bc.engine.ServeHTTP(w, bc.req)
	return w
}

// benchStores are the stores the middleware benchmarks run on.
var benchStores = gormtest.Dialects

// BenchmarkBaseline is the floor under the middleware benchmarks: the same
// engine, request and handler, without the middleware.
func BenchmarkBaseline(b *testing.B) {
	bc := newBenchClient(newBenchEngine(b, "", nil), orderBody(1, false))
	b.ReportAllocs()
	for b.Loop() {
		if w := bc.post("k"); w.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// BenchmarkMiddlewareNewKey is a first request: fingerprint, a transaction
// with the record inserted complete, the answer sent. Making each key costs
// the test one allocation of its own.
func BenchmarkMiddlewareNewKey(b *testing.B) {
	for _, d := range benchStores {
		b.Run("store="+d, func(b *testing.B) {
			bc := newBenchClient(newBenchEngine(b, d, nil), orderBody(1, false))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				if w := bc.post("new-" + strconv.Itoa(n)); w.Code != http.StatusCreated || w.Header().Get(ginidem.HeaderReplayed) != "" {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// BenchmarkMiddlewareNewKeyTombstones is BenchmarkMiddlewareNewKey with
// tombstones on: the insert also checks the tombstones' primary key, in the
// same statement.
func BenchmarkMiddlewareNewKeyTombstones(b *testing.B) {
	for _, d := range benchStores {
		b.Run("store="+d, func(b *testing.B) {
			bc := newBenchClient(newBenchEngine(b, d, nil, gormstore.WithTombstones(30*24*time.Hour)), orderBody(1, false))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				if w := bc.post("new-" + strconv.Itoa(n)); w.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// BenchmarkMiddlewareReplay is a retry of a completed request, answered
// from the store, from Redis, or from a cache in memory. The last touches
// neither a database nor the network: it is the middleware's own CPU cost.
func BenchmarkMiddlewareReplay(b *testing.B) {
	run := func(b *testing.B, engine *gin.Engine, ready func() bool) {
		bc := newBenchClient(engine, orderBody(1, false))
		if w := bc.post("replay-1"); w.Code != http.StatusCreated {
			b.Fatalf("first request: status %d: %s", w.Code, w.Body)
		}
		// The cache is filled off the request's path: wait for it.
		deadline := time.Now().Add(5 * time.Second)
		for ready != nil && !ready() {
			if time.Now().After(deadline) {
				b.Fatal("the cache never received the record")
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportAllocs()
		for b.Loop() {
			if w := bc.post("replay-1"); w.Code != http.StatusCreated || w.Header().Get(ginidem.HeaderReplayed) != "true" {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	}
	for _, d := range benchStores {
		b.Run("store="+d, func(b *testing.B) {
			run(b, newBenchEngine(b, d, nil), nil)
		})
	}
	b.Run("cache=redis", func(b *testing.B) {
		rs := testkit.StartRedis(b)
		client, err := redisconn.Open(rs.URL(), redisconn.Options{Timeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		cache := redisidem.NewCache(client, []byte("a-redis-key-secret-for-benchmarks"), nil)
		b.Cleanup(func() { cache.Close(); _ = client.Close() })
		run(b, newBenchEngine(b, "sqlite", cache), func() bool {
			_, err := cache.GetCompleted(context.Background(), "m1", "replay-1")
			return err == nil
		})
	})
	b.Run("cache=memory", func(b *testing.B) {
		cache := newMemCache()
		run(b, newBenchEngine(b, "sqlite", cache), func() bool {
			return cache.Get(context.Background(), "m1", "replay-1", time.Now()) != nil
		})
	})
}

// memCache is a Cache in a map: a replay served from it costs only the
// middleware's own work.
type memCache struct {
	mu   sync.Mutex
	recs map[string]*idempotency.Record
}

func newMemCache() *memCache { return &memCache{recs: map[string]*idempotency.Record{}} }

func (m *memCache) Get(_ context.Context, merchantID, key string, _ time.Time) *idempotency.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recs[merchantID+"\x00"+key]
}

func (m *memCache) Keep(rec *idempotency.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[rec.Scope+"\x00"+rec.Key] = rec
}

func (m *memCache) Changed(string, string) {}

func (m *memCache) Subscribe(string, string) (<-chan struct{}, func()) { return nil, func() {} }
