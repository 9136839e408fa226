package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkeys/payments/tools/harness"
)

// orderBody is the order every request creates or replays: one line, the
// size of a typical checkout.
const orderBody = `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"SKU-1","name":"Coffee","quantity":2,"unit_amount":1250}],"metadata":{"cart":"c_1"}}`

// peerKey is key as the Fiber middleware's default check takes one: 36
// characters, a UUID's shape (a SHA-256 digest of key, in hex), the same
// for the same key.
func peerKey(key string) string {
	h := sha256.Sum256([]byte(key))
	x := hex.EncodeToString(h[:16])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// orderRequest is how a service takes an order: the body, the credential,
// the header that carries the key and the key as written there, and
// whether it marks a replay (Idempotent-Replayed: true).
type orderRequest struct {
	body, credential, keyHeader string
	key                         func(string) string
	marksReplays                bool
}

var (
	// apiOrders is the API's (and the floor's) order request.
	apiOrders = orderRequest{body: orderBody, credential: apiKey, keyHeader: "Idempotency-Key",
		key: func(k string) string { return k }, marksReplays: true}
	// peerOrders is tools/fiberpeer's: its customer and total under
	// X-Idempotency-Key, 36 characters (peerKey); it marks no replay.
	peerOrders = orderRequest{body: `{"customer_id":"cus_1","amount":2500}`, credential: "sk_a", keyHeader: "X-Idempotency-Key",
		key: peerKey}
)

// apiKey is a demo merchant's key, seeded by the API at start.
const apiKey = "sk_test_acme"

// result is what one measured phase produced.
type result struct {
	Name     string
	Requests int
	Failed   int
	Elapsed  time.Duration
	Lat      *harness.Latencies
	// PoolWaits is how many times a request had to wait for a database
	// connection during the phase, warm-up included (-1: unknown).
	PoolWaits int
	// Note is shown beside the figures (what was checked, or why a row is
	// missing).
	Note string
	// CPU is what the API process spent (user + system) during the
	// measured window, less what it spends idle in as long (zero for the
	// raw loop, which runs in the bench itself).
	CPU time.Duration
	// Spent is the process's whole CPU over the window, and Idle what it
	// spends idle in as long: CPU is Spent less Idle.
	Spent, Idle time.Duration
	// Sys is the part of Spent in the kernel (system CPU), and Switches
	// the context switches of the process's threads over the window.
	Sys      time.Duration
	Switches int64
	// GC is the CPU of the garbage collections during the window, and
	// GCCycles their number (only for an instance run with gctrace).
	GC       time.Duration
	GCCycles int
	// Load is the machine's load average over the minute the window ended.
	Load float64
	// Runs are the rounds a median was picked from (the whole-process
	// phases), in the order they ran.
	Runs []result
}

// ProcessCPUPerRequest is the process's whole CPU over requests, idle
// included.
func (r result) ProcessCPUPerRequest() time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return r.Spent / time.Duration(r.Requests)
}

// perRequest is d over the requests.
func (r result) perRequest(d time.Duration) time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return d / time.Duration(r.Requests)
}

// CPUPerRequest is CPU over requests (zero when unmeasured).
func (r result) CPUPerRequest() time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Requests)
}

// Rate is requests per second.
func (r result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// op is one unit of work of a closed-loop client: worker is the client's
// number, i its own count of operations so far.
type op func(ctx context.Context, worker, i int) error

// closedLoop runs clients goroutines, each doing op back to back, and
// measures them while window runs, after a warm-up of warm. A failed op
// counts as a request and as a failure.
func closedLoop(ctx context.Context, name string, clients int, warm time.Duration, window func(context.Context), do op) result {
	var (
		measuring atomic.Bool
		requests  atomic.Int64
		failed    atomic.Int64
		firstErr  atomic.Value
		lat       = &harness.Latencies{}
		wg        sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range clients {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				start := time.Now()
				err := do(ctx, w, i)
				if !measuring.Load() || ctx.Err() != nil {
					continue
				}
				lat.Add(time.Since(start))
				requests.Add(1)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	sleep(ctx, warm)
	measuring.Store(true)
	start := time.Now()
	window(ctx)
	measuring.Store(false)
	elapsed := time.Since(start)
	load := loadAverage()
	cancel()
	wg.Wait()
	r := result{Name: name, Requests: int(requests.Load()), Failed: int(failed.Load()), Elapsed: elapsed, Lat: lat, Load: load}
	if err, ok := firstErr.Load().(error); ok {
		r.Note = "first failure: " + err.Error()
	}
	return r
}

// forDuration is a measuring window of d.
func forDuration(d time.Duration) func(context.Context) {
	return func(ctx context.Context) { sleep(ctx, d) }
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// api sends requests to one running API.
type api struct {
	base   string
	client *http.Client
	pid    int      // the API's process, whose CPU measure reads
	gc     *gcMeter // its garbage collections, when it runs with gctrace
	// orders is how it takes an order: apiOrders, or peerOrders.
	orders orderRequest
}

func newAPI(base string, conns int) *api {
	return &api{base: base, orders: apiOrders, client: &http.Client{
		Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute},
		Timeout:   30 * time.Second,
	}}
}

// answer is one HTTP answer, read whole.
type answer struct {
	status   int
	replayed bool
	body     string
}

// createOrder posts the target's order under key, as a.orders says (no
// key header when key is empty).
func (a *api) createOrder(ctx context.Context, key string) (answer, error) {
	o := a.orders
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/v1/orders", strings.NewReader(o.body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+o.credential)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(o.keyHeader, o.key(key))
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true", body: string(got)}, nil
}

// expect turns an answer that is not want (or whose replay flag is not
// replayed) into an error.
func expect(a answer, err error, want int, replayed bool) error {
	if err != nil {
		return err
	}
	if a.status != want || a.replayed != replayed {
		return fmt.Errorf("got %d (replayed %v), want %d (replayed %v): %.200s", a.status, a.replayed, want, replayed, a.body)
	}
	return nil
}

// created posts a new order under a fresh key and expects 201.
func (a *api) created(run string) op {
	return func(ctx context.Context, w, i int) error {
		ans, err := a.createOrder(ctx, fmt.Sprintf("%s-%d-%d", run, w, i))
		return expect(ans, err, http.StatusCreated, false)
	}
}

// replayed posts orderBody under one of keys, in turn, and expects the
// stored 201 with Idempotent-Replayed: true.
func (a *api) replayed(keys []string) op {
	return func(ctx context.Context, w, i int) error {
		k := keys[(w*7919+i)%len(keys)]
		ans, err := a.createOrder(ctx, k)
		return expect(ans, err, http.StatusCreated, true)
	}
}
