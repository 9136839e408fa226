package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of the options below.
const (
	DefaultMaxAttempts    = 8
	DefaultBaseBackoff    = 250 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultAttemptTimeout = 30 * time.Second
)

// maxAnswer bounds how much of an answer's body is read.
const maxAnswer = 4 << 20

// Client calls the payments API. Make one with New and share it: it is safe
// for concurrent use.
type Client struct {
	baseURL        string
	apiKey         string
	http           *http.Client
	maxAttempts    int
	baseBackoff    time.Duration
	maxBackoff     time.Duration
	attemptTimeout time.Duration
	random         func() float64
	sleep          func(context.Context, time.Duration) error
	onAttempt      func(Attempt)
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the *http.Client that sends the requests (default
// http.DefaultClient). Leave its Timeout at zero and use WithAttemptTimeout:
// the client needs to tell one slow attempt from the whole call.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithMaxAttempts sets how many requests one call may make, the first
// included (default DefaultMaxAttempts). 1 turns retries off.
func WithMaxAttempts(n int) Option { return func(c *Client) { c.maxAttempts = max(1, n) } }

// WithBackoff sets the backoff: before retry n the client waits a random time
// in [0, min(maxBackoff, base·2^(n-1))) (defaults DefaultBaseBackoff and
// DefaultMaxBackoff). A Retry-After in the answer replaces it.
func WithBackoff(base, maxBackoff time.Duration) Option {
	return func(c *Client) { c.baseBackoff, c.maxBackoff = base, max(base, maxBackoff) }
}

// WithRand sets the random source of the jitter (default: the math/rand/v2
// global source). The client serialises its use, so r need not be safe for
// concurrent use. Tests pass a seeded source to get the same waits each run.
func WithRand(r *mathrand.Rand) Option {
	return func(c *Client) {
		var mu sync.Mutex
		c.random = func() float64 {
			mu.Lock()
			defer mu.Unlock()
			return r.Float64()
		}
	}
}

// WithAttemptTimeout bounds one attempt, answer included (default
// DefaultAttemptTimeout; zero: no bound but the context's). An attempt that
// runs out is retried under the same key, like a network error: the server
// may have done the work, and the retry gets its answer.
func WithAttemptTimeout(d time.Duration) Option { return func(c *Client) { c.attemptTimeout = d } }

// WithSleep replaces how the client waits between attempts. sleep must
// return early with ctx.Err() when ctx ends. Tests use it to record the waits
// the client asks for instead of spending them.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// WithOnAttempt sets a hook called after every attempt, from the goroutine
// of the call, before the client waits for the next one: to log or count
// attempts. With concurrent calls it runs concurrently.
func WithOnAttempt(hook func(Attempt)) Option { return func(c *Client) { c.onAttempt = hook } }

// New returns a client of the API at baseURL (like "http://127.0.0.1:8080")
// that authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{
		baseURL:        strings.TrimRight(baseURL, "/"),
		apiKey:         apiKey,
		http:           http.DefaultClient,
		maxAttempts:    DefaultMaxAttempts,
		baseBackoff:    DefaultBaseBackoff,
		maxBackoff:     DefaultMaxBackoff,
		attemptTimeout: DefaultAttemptTimeout,
		random:         mathrand.Float64,
		sleep:          sleepContext,
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// CallOption configures one call.
type CallOption func(*callOptions)

type callOptions struct {
	key string
}

// WithIdempotencyKey makes the call use key instead of a fresh one. Use it
// when the operation must outlive the call: make the key when the operation
// is decided (NewIdempotencyKey), store it with the operation, and pass it
// on every call for that operation, in this process or after a restart.
func WithIdempotencyKey(key string) CallOption { return func(o *callOptions) { o.key = key } }

// NewIdempotencyKey returns a new random key: 26 characters of base32 from
// crypto/rand (130 bits), valid for the API (visible ASCII, at most 255).
func NewIdempotencyKey() string { return rand.Text() }

// Attempt describes one HTTP exchange of a call, for WithOnAttempt.
type Attempt struct {
	// Method and Path name the request, like "POST" "/v1/orders".
	Method, Path string
	// IdempotencyKey is the call's key, the same on every attempt; empty for
	// a GET. Log a hash or a prefix of it, not the whole key.
	IdempotencyKey string
	// Number counts the call's attempts from 1.
	Number int
	// Status is the answer's HTTP status, 0 when none arrived.
	Status int
	// Code is the problem code of an error answer.
	Code string
	// Replayed is true when the server answered from its stored record.
	Replayed bool
	// Err is what went wrong: a network error, a timeout, an *APIError.
	// Nil for a 2xx, a 202 included.
	Err error
	// Elapsed is how long the attempt took.
	Elapsed time.Duration
	// Retry is true when the client will try again, after Wait.
	Retry bool
	// Wait is the pause before the next attempt: the answer's Retry-After,
	// or the jittered backoff.
	Wait time.Duration
}

// request is one logical call: every attempt sends exactly these bytes.
type request struct {
	method, path string
	body         []byte // nil for a GET
	key          string // "" for a GET
	// pendingOK says that a 202 is a resource still processing, to ask
	// about again under the same key (payments and refunds).
	pendingOK bool
}

// answer is one HTTP answer, read whole.
type answer struct {
	status     int
	header     http.Header
	body       []byte
	replayed   bool
	retryAfter time.Duration
}

// outcome is the end of a call's attempts: the final 2xx answer, or the
// last 202 when the resource was still processing.
type outcome struct {
	ans      *answer
	attempts int
}

// do sends r until it gets a final answer, the attempts run out or ctx ends.
// It returns the outcome whenever it has an answer to decode (a 2xx, or the
// last 202 together with an error matching ErrStillProcessing), and the
// error otherwise: an *APIError, a network error, or ctx's error, each
// wrapped with the method and path.
func (c *Client) do(ctx context.Context, r *request) (outcome, error) {
	if _, err := url.Parse(c.baseURL + r.path); err != nil {
		return outcome{}, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	var (
		lastPending *answer // the last 202, while its resource is processing
		lastErr     error
	)
	for n := 1; ; n++ {
		started := time.Now()
		a, err := c.send(ctx, r)
		at := Attempt{Method: r.method, Path: r.path, IdempotencyKey: r.key, Number: n, Elapsed: time.Since(started)}

		var retryAfter time.Duration
		switch {
		case err != nil && ctx.Err() != nil:
			// The caller gave up: not the attempt's fault, and no retry.
			at.Err = ctx.Err()
			c.report(at)
			return c.stopped(r, lastPending, n, ctx.Err())
		case err != nil:
			at.Err, at.Retry = err, true
			lastErr = err
		case a.status == http.StatusAccepted && r.pendingOK:
			at.Status, at.Replayed, at.Retry = a.status, a.replayed, true
			retryAfter = a.retryAfter
			lastPending, lastErr = a, nil
		case a.status >= 200 && a.status < 300:
			at.Status, at.Replayed = a.status, a.replayed
			c.report(at)
			return outcome{ans: a, attempts: n}, nil
		default:
			apiErr := toAPIError(a, r.key)
			at.Status, at.Replayed, at.Code, at.Err = a.status, a.replayed, apiErr.Code, apiErr
			at.Retry = apiErr.Retryable()
			retryAfter = apiErr.RetryAfter
			lastErr = apiErr
		}
		final := !at.Retry // an answer that is final for this key: no retry can change it
		if at.Retry && n >= c.maxAttempts {
			at.Retry = false
		}
		if at.Retry {
			at.Wait = retryAfter
			if at.Wait <= 0 {
				at.Wait = c.backoff(n)
			}
		}
		c.report(at)

		switch {
		case at.Retry:
			if err := c.sleep(ctx, at.Wait); err != nil {
				return c.stopped(r, lastPending, n, err)
			}
		case final && n == 1:
			return outcome{}, fmt.Errorf("%s %s: %w", r.method, r.path, lastErr)
		case final:
			return outcome{}, fmt.Errorf("%s %s: after %d attempts: %w", r.method, r.path, n, lastErr)
		case lastPending != nil && lastErr == nil:
			// Out of attempts, the server still answering 202.
			return outcome{ans: lastPending, attempts: n},
				fmt.Errorf("%s %s: %w after %d attempts", r.method, r.path, ErrStillProcessing, n)
		case lastPending != nil:
			// Out of attempts after a 202, then failures: the resource was
			// processing when we last heard of it.
			return outcome{ans: lastPending, attempts: n},
				fmt.Errorf("%s %s: %w after %d attempts (last attempt: %w)", r.method, r.path, ErrStillProcessing, n, lastErr)
		default:
			return outcome{}, fmt.Errorf("%s %s: gave up after %d attempts: %w", r.method, r.path, n, lastErr)
		}
	}
}

// stopped is do's answer when ctx ended after n attempts.
func (c *Client) stopped(r *request, lastPending *answer, n int, ctxErr error) (outcome, error) {
	if lastPending != nil {
		return outcome{ans: lastPending, attempts: n},
			fmt.Errorf("%s %s: %w: %w", r.method, r.path, ErrStillProcessing, ctxErr)
	}
	return outcome{}, fmt.Errorf("%s %s: %w", r.method, r.path, ctxErr)
}

func (c *Client) report(a Attempt) {
	if c.onAttempt != nil {
		c.onAttempt(a)
	}
}

// backoff is the full-jitter wait before retry n (n ≥ 1): uniform in
// [0, min(maxBackoff, base·2^(n-1))).
func (c *Client) backoff(n int) time.Duration {
	ceiling := c.baseBackoff
	for i := 1; i < n && ceiling < c.maxBackoff; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, c.maxBackoff)
	return time.Duration(c.random() * float64(ceiling))
}

// send makes one attempt and reads its answer whole. An error is a network
// error or a timeout: no answer, or not all of it, arrived.
func (c *Client) send(ctx context.Context, r *request) (*answer, error) {
	if c.attemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.attemptTimeout)
		defer cancel()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.baseURL+r.path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Accept", "application/json, application/problem+json")
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	return &answer{
		status:     resp.StatusCode,
		header:     resp.Header,
		body:       b,
		replayed:   resp.Header.Get("Idempotent-Replayed") == "true",
		retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
	}, nil
}

// maxRetryAfter caps the wait a server can ask for, however it spells it.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads Retry-After as delay-seconds or as an HTTP date;
// zero when absent or unreadable, at most maxRetryAfter.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// sleepContext waits d, or less when ctx ends first.
func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errDecode wraps a 2xx answer the client could not read.
var errDecode = errors.New("decode answer")
