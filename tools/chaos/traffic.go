package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/problem"
	"github.com/idemkeys/payments/tools/harness"
)

// answer is one HTTP answer a client received for a keyed POST.
type answer struct {
	status   int
	hash     [sha256.Size]byte // of the body, byte for byte
	replayed bool
	// epoch numbers the lives of a key: it grows when a scenario sends keys
	// again after they expired, which makes them new keys.
	epoch int
	// Read from the body: the resource id (an order or a payment), its
	// status, the payment of a 402, and an error's code.
	id, resourceStatus, paymentID, code string
}

// recorder keeps every answer any client received, by idempotency key, and
// how long each request took.
type recorder struct {
	mu       sync.Mutex
	byKey    map[string][]answer
	statuses map[string]int // "201", "409 idempotency_request_in_progress", "no answer"
	requests atomic.Int64
	lat      harness.Latencies
	epoch    atomic.Int64
}

func newRecorder() *recorder {
	return &recorder{byKey: map[string][]answer{}, statuses: map[string]int{}}
}

// add records an answer to a keyed POST.
func (r *recorder) add(key string, status int, body []byte, replayed bool) answer {
	a := answer{status: status, hash: sha256.Sum256(body), replayed: replayed, epoch: int(r.epoch.Load())}
	var fields struct {
		ID        string `json:"id"`
		Status    any    `json:"status"`
		PaymentID string `json:"payment_id"`
		Code      string `json:"code"`
	}
	if json.Unmarshal(body, &fields) == nil {
		a.id, a.paymentID, a.code = fields.ID, fields.PaymentID, fields.Code
		if s, ok := fields.Status.(string); ok {
			a.resourceStatus = s
		}
	}
	label := strconv.Itoa(status)
	if a.code != "" {
		label += " " + a.code
	}
	r.mu.Lock()
	r.byKey[key] = append(r.byKey[key], a)
	r.statuses[label]++
	r.mu.Unlock()
	return a
}

// noAnswer counts a request that got no answer (a cut connection, a dead
// instance, a timeout).
func (r *recorder) noAnswer() {
	r.mu.Lock()
	r.statuses["no answer"]++
	r.mu.Unlock()
}

// took records how long one attempt took, answer or not, as its caller saw
// it.
func (r *recorder) took(d time.Duration) { r.lat.Add(d) }

// traced makes every request sent with ctx count in requestCount when it is
// written to the wire, including the resends Go's transport makes on its
// own (it resends a request carrying an Idempotency-Key when a kept-alive
// connection turns out closed).
func (r *recorder) traced(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { r.requests.Add(1) },
	})
}

func (r *recorder) requestCount() int64 { return r.requests.Load() }

// answers returns a copy of every key's answers.
func (r *recorder) answers() map[string][]answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]answer, len(r.byKey))
	for k, v := range r.byKey {
		out[k] = slices.Clone(v)
	}
	return out
}

// statusSummary lists the answers by status, most frequent first.
func (r *recorder) statusSummary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range r.statuses {
		all = append(all, kv{k, n})
	}
	slices.SortFunc(all, func(a, b kv) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.k, b.k)
	})
	parts := make([]string, len(all))
	for i, e := range all {
		parts[i] = fmt.Sprintf("%s ×%d", e.k, e.n)
	}
	return strings.Join(parts, ", ")
}

// stage is what a running scenario works with.
type stage struct {
	name string
	c    *cluster
	p    profile
	rnd  *rand.Rand
	rec  *recorder
	log  io.Writer

	// allowedOrders raises the number of orders a key may have made above
	// one (the expiry scenario sends keys again after they expired).
	allowedOrders map[string]int
	// expectStatus says whether an answer's status is one this scenario may
	// give; nil means expectedStatus.
	expectStatus func(status int, code string) bool
	// failover is what a failover scenario measured, for its audit and
	// the report.
	failover *failoverFigures

	mu       sync.Mutex
	problems []string
}

// problem records a violation the scenario itself saw.
func (s *stage) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

func (s *stage) violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.problems)
}

// expectedStatus is the set of answers a keyed POST may get in any
// scenario: the final ones, 202 while the provider's outcome is unknown, the
// idempotency layer's 409 while the original runs, and the "retry later"
// answers (502 nothing charged, 503 database down). A 422 would mean the
// harness changed a body under a key; a 500 is a bug.
func expectedStatus(status int, code string) bool {
	switch status {
	case 200, 201, 202, 402, 502, 503:
		return true
	case 409:
		// The layer's own while the original runs, a conflict with a
		// payment in flight (it clears), or a stored business conflict
		// (the API's own list).
		return code == problem.CodeIdempotencyInProgress || code == problem.CodePaymentInProgress || handlers.KeptConflict(code)
	}
	return false
}

// caller sends keyed requests straight to the API instances (round robin,
// skipping none: a dead instance is a failed attempt) and retries each
// operation under its key until a final answer, as a careful client does.
type caller struct {
	st      *stage
	hc      *http.Client
	targets []string // base URLs
	next    atomic.Uint64
	// maxWait caps the wait a Retry-After asks for, so that a storm keeps
	// storming.
	maxWait time.Duration
	// opTimeout bounds one operation, retries included.
	opTimeout  time.Duration
	unfinished atomic.Int64
	// attempt, when set, is told of every attempt as it ends: when it was
	// sent and its status (0: no answer).
	attempt func(sent time.Time, status int)
}

func newCaller(st *stage, targets []string) *caller {
	return &caller{
		st: st, targets: targets, maxWait: 300 * time.Millisecond, opTimeout: 90 * time.Second,
		hc: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second},
		},
	}
}

// directCaller calls the cluster's instances directly.
func directCaller(st *stage) *caller {
	urls := make([]string, len(st.c.apis))
	for i := range urls {
		urls[i] = st.c.apiURL(i)
	}
	return newCaller(st, urls)
}

// result is the final answer of an operation.
type result struct {
	answer
	body     []byte
	attempts int
}

// send makes one attempt at target and records it.
func (c *caller) send(ctx context.Context, target, path, key string, body []byte) (answer, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(c.st.rec.traced(ctx), http.MethodPost, target+path, bytes.NewReader(body))
	if err != nil {
		return answer{}, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		c.st.rec.took(time.Since(start))
		c.st.rec.noAnswer()
		c.ended(start, 0)
		return answer{}, nil, nil, err
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	c.st.rec.took(time.Since(start))
	if err != nil {
		c.st.rec.noAnswer()
		c.ended(start, 0)
		return answer{}, nil, nil, err
	}
	c.ended(start, resp.StatusCode)
	a := c.st.rec.add(key, resp.StatusCode, data, resp.Header.Get("Idempotent-Replayed") == "true")
	check := c.st.expectStatus
	if check == nil {
		check = expectedStatus
	}
	if !check(a.status, a.code) {
		c.st.problem("unexpected answer %d %s to POST %s (key %s): %.300s", a.status, a.code, path, key, data)
	}
	return a, data, resp.Header, nil
}

// ended tells the attempt hook, if any, of an attempt that ended.
func (c *caller) ended(sent time.Time, status int) {
	if c.attempt != nil {
		c.attempt(sent, status)
	}
}

// until sends the request under key, to the instances in turn, until a
// final answer arrives (202 is not final for a payment), and returns it.
func (c *caller) until(ctx context.Context, path, key string, body []byte) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opTimeout)
	defer cancel()
	for n := 1; ; n++ {
		target := c.targets[c.next.Add(1)%uint64(len(c.targets))]
		a, data, header, err := c.send(ctx, target, path, key, body)
		wait := time.Duration(0)
		switch {
		case err != nil:
		case final(a):
			return result{answer: a, body: data, attempts: n}, nil
		default:
			if s, perr := strconv.Atoi(header.Get("Retry-After")); perr == nil {
				wait = time.Duration(s) * time.Second
			}
		}
		if wait <= 0 || wait > c.maxWait {
			wait = c.backoff(n)
		}
		select {
		case <-ctx.Done():
			c.unfinished.Add(1)
			c.st.problem("operation under key %s gave up after %d attempts: %v", key, n, ctx.Err())
			return result{}, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// backoff is a jittered pause before retry n: up to 25ms·2^n, at most
// maxWait.
func (c *caller) backoff(n int) time.Duration {
	ceiling := min(25*time.Millisecond<<min(n, 8), c.maxWait)
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	return time.Duration(c.st.rnd.Int64N(int64(ceiling)) + 1)
}

// final reports whether an answer ends the operation: it is stored and
// would be replayed (2xx but 202, 402, and the 409s the API keeps, which
// handlers.KeptConflict names: the audit follows the API's one list rather
// than keep its own), or it is an answer no retry can change.
func final(a answer) bool {
	switch {
	case a.status == http.StatusAccepted:
		return false
	case a.status >= 200 && a.status < 300, a.status == http.StatusPaymentRequired:
		return true
	case a.status == http.StatusConflict:
		// Not kept but final all the same: idempotency_key_expired, the
		// layer's answer for a purged key, which a retry gets again. Not
		// final: idempotency_request_in_progress and payment_in_progress,
		// which clear.
		return handlers.KeptConflict(a.code) || a.code == problem.CodeIdempotencyKeyExpired
	case a.status == http.StatusTooManyRequests, a.status >= 500:
		return false
	}
	return true // other 4xx: a retry gets the same
}

// orderBody is the body of a new order; the key is in its metadata, so the
// audit can count the orders each key made.
func orderBody(key string, amount int64) []byte {
	b, _ := json.Marshal(map[string]any{
		"customer_id": "cus_chaos",
		"currency":    "BRL",
		"items":       []map[string]any{{"sku": "SKU-1", "name": "Coffee", "quantity": 1, "unit_amount": amount}},
		"metadata":    map[string]string{"chaos_key": key},
	})
	return b
}

func payBody(method string) []byte {
	return []byte(`{"payment_method":"` + method + `"}`)
}

// createOrder makes an order under key and returns its id.
func (c *caller) createOrder(ctx context.Context, key string, amount int64) (string, error) {
	r, err := c.until(ctx, "/v1/orders", key, orderBody(key, amount))
	if err != nil {
		return "", err
	}
	if r.status != http.StatusCreated || r.id == "" {
		return "", fmt.Errorf("create order under %s: final answer %d %s", key, r.status, r.body)
	}
	return r.id, nil
}

// pay pays an order under key and returns the final answer.
func (c *caller) pay(ctx context.Context, orderID, key, method string) (result, error) {
	return c.until(ctx, "/v1/orders/"+orderID+"/payments", key, payBody(method))
}

// errStopped, returned by a job, stops its worker (only).
var errStopped = errors.New("stopped")

// pool runs job(i) for i in [0, n) on workers goroutines and returns the
// first error.
func pool(ctx context.Context, n, workers int, job func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := job(ctx, i); err != nil {
					if !errors.Is(err, errStopped) {
						cancel(err) // a failure of the harness ends every worker
					}
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// paymentMethod picks the card of operation i: mostly one that succeeds,
// some declined, so both final answers (201 and 402) are in every run.
func paymentMethod(rnd *rand.Rand, mu *sync.Mutex) string {
	mu.Lock()
	defer mu.Unlock()
	switch x := rnd.IntN(100); {
	case x < 80:
		return "pm_card_visa"
	case x < 90:
		return "pm_card_declined"
	default:
		return "pm_card_insufficient_funds"
	}
}

// key is the idempotency key of operation i of this scenario.
func (s *stage) key(kind string, i int) string {
	return fmt.Sprintf("%s-%s-%d", kind, s.name, i)
}

// method picks a payment method with the scenario's random source.
func (s *stage) method() string { return paymentMethod(s.rnd, &s.mu) }

// orderAndPay is one customer: an order under one key, then its payment
// under another, each retried under its key until a final answer. A client
// that gives up is recorded as a finding by until.
func (s *stage) orderAndPay(ctx context.Context, c *caller, i int, method string) {
	orderID, err := c.createOrder(ctx, s.key("order", i), 1000+int64(i))
	if err != nil {
		if ctx.Err() == nil {
			s.problem("operation %d: %v", i, err)
		}
		return
	}
	_, _ = c.pay(ctx, orderID, s.key("pay", i), method)
}

// load runs job(i) on workers goroutines for i = 0, 1, ... until at least
// minOps jobs ran and faultsDone is closed, so that every fault lands under
// load however fast the jobs are. It returns how many jobs ran.
func load(ctx context.Context, minOps, workers int, faultsDone <-chan struct{}, job func(ctx context.Context, i int)) (int, error) {
	var ran atomic.Int64
	err := pool(ctx, 1<<30, workers, func(ctx context.Context, i int) error {
		if i >= minOps {
			select {
			case <-faultsDone:
				return errStopped
			default:
			}
		}
		ran.Add(1)
		job(ctx, i)
		return nil
	})
	return int(ran.Load()), err
}
