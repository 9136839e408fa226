package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults for the zero values of ClientOptions.
const (
	// DefaultClientTimeout bounds one provider call.
	DefaultClientTimeout = 5 * time.Second
	// DefaultBreakerFailures is how many failures in a row open the breaker.
	DefaultBreakerFailures = 5
	// DefaultBreakerOpenTimeout is how long the breaker stays open before it
	// lets one trial call through.
	DefaultBreakerOpenTimeout = 5 * time.Second
	// DefaultBreakerMerchants bounds how many merchants' breakers a Client
	// keeps at once.
	DefaultBreakerMerchants = 1000

	maxResponseBytes = 1 << 20
)

// The three kinds of error. Every error a Client returns is exactly one of:
// ErrNotExecuted, ErrUnknownOutcome, or a definitive answer (*APIError,
// which ErrNotFound matches for a 404). Callers branch with errors.Is and
// errors.As.
var (
	// ErrNotExecuted: the provider did nothing (the connection was refused,
	// it answered 503 or 429, or the breaker is open). Trying again is safe.
	ErrNotExecuted = errors.New("provider call not executed")
	// ErrUnknownOutcome: the request may or may not have taken effect (a
	// timeout, the connection lost after sending, a 5xx other than 503, an
	// answer that cannot be read). Settle it by retrying with the same
	// idempotency key or looking the key up; never with a new key.
	ErrUnknownOutcome = errors.New("provider call outcome unknown")
	// ErrCircuitOpen comes with ErrNotExecuted when the breaker refused the
	// call without sending it, because the provider kept failing.
	ErrCircuitOpen = errors.New("circuit breaker open")
	// ErrNotFound: the provider has no such object. It matches an *APIError
	// with status 404.
	ErrNotFound = errors.New("provider: not found")
)

// APIError is a definitive refusal: the provider understood the request and
// answered 4xx (other than 429). The same request will be refused again.
type APIError struct {
	// Status is the HTTP status, e.g. 422.
	Status int
	// Code is the problem's code, e.g. CodeIdempotencyKeyReused.
	Code   string
	Title  string
	Detail string
	// Errors lists invalid fields for CodeValidationFailed.
	Errors []FieldError
}

// Error describes the refusal.
func (e *APIError) Error() string {
	return fmt.Sprintf("provider refused the request: %d %s: %s", e.Status, e.Code, e.Detail)
}

// Is makes errors.Is(err, ErrNotFound) true for a 404.
func (e *APIError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound
}

// ClientOptions configures a Client. The zero value is usable.
type ClientOptions struct {
	// Timeout bounds each call. Zero means DefaultClientTimeout.
	Timeout time.Duration
	// HTTPClient sends the requests. Nil means a client of its own that
	// does not follow redirects. Its transport should be an *http.Transport
	// (or wrap one and pass httptrace hooks on): that is how the Client
	// knows a request was never sent. With any other transport only dial
	// errors count as ErrNotExecuted.
	HTTPClient *http.Client
	// Transport is the base transport of the client's own HTTPClient: nil
	// is http.DefaultTransport; a provider StartInMemory serves is reached
	// through its Running.Transport. It must report connections through
	// httptrace as net/http's does (see neverSent). Unused with HTTPClient.
	Transport http.RoundTripper
	// WrapTransport, if set, wraps the transport of the client's own
	// HTTPClient (tracing.Tracing.Transport: a span per call and the
	// traceparent header). The wrapper must send each request on with its
	// context, whose httptrace hooks tell the Client that a request was
	// never sent. Unused with HTTPClient.
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// Breaker tunes the circuit breaker.
	Breaker BreakerSettings
}

// BreakerSettings tunes the circuit breakers. A Client keeps one breaker
// per merchant (the context's, WithMerchant) and one for the calls that name
// no merchant (lookups), so that one merchant's failures stop that
// merchant's calls alone (see the package doc). Only ErrNotExecuted and
// ErrUnknownOutcome count as failures; declines, refused refunds and other
// definitive answers show a healthy provider and count as successes. Calls
// whose context the caller cancelled count as neither.
type BreakerSettings struct {
	// Failures in a row that open a breaker. Zero means
	// DefaultBreakerFailures.
	Failures uint32
	// OpenTimeout is how long a breaker stays open before it lets one
	// trial call through; its success closes the breaker, its failure opens
	// it again. Zero means DefaultBreakerOpenTimeout.
	OpenTimeout time.Duration
	// Merchants bounds the merchants' breakers kept at once. Zero means
	// DefaultBreakerMerchants. A merchant beyond the bound takes the place
	// of the one whose breaker was used least recently, a closed one first.
	Merchants int
	// OnStateChange, if set, hears every transition of a breaker ("closed",
	// "open", "half-open") with the merchant it belongs to ("" for the
	// breaker of calls that name none), for logs and metrics. It must be
	// quick and must not call the Client.
	OnStateChange func(merchant, from, to string)
}

// Client calls the provider's API. It is safe for concurrent use; share one
// per provider so that its breakers see all the traffic.
type Client struct {
	baseURL string
	timeout time.Duration
	http    *http.Client
	// traced: the transport reports when a request gets a connection, so
	// "never got one" proves the request was never sent.
	traced   bool
	breakers *breakers
}

// errCallerGaveUp marks calls the breaker must not count: the caller
// cancelled, which says nothing about the provider's health.
var errCallerGaveUp = errors.New("caller gave up")

// NewClient returns a Client for the provider at baseURL, e.g. Running.URL
// or "http://localhost:8081". A malformed baseURL is not reported here: every
// call then fails with ErrNotExecuted.
func NewClient(baseURL string, opts ClientOptions) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultClientTimeout
	}
	// traced: the requests carry our httptrace hooks down to an
	// *http.Transport (see neverSent).
	traced := false
	if opts.HTTPClient == nil {
		transport := opts.Transport // nil: http.DefaultTransport
		if opts.WrapTransport != nil {
			if transport == nil {
				transport = http.DefaultTransport
			}
			transport = opts.WrapTransport(transport)
		}
		opts.HTTPClient = &http.Client{
			Transport: transport,
			// A redirect is not part of the provider's API; show it as the
			// unexpected answer it is instead of following it.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		traced = true
	} else {
		_, traced = opts.HTTPClient.Transport.(*http.Transport)
		traced = traced || opts.HTTPClient.Transport == nil
	}

	return &Client{
		baseURL:  strings.TrimRight(baseURL, "/"),
		timeout:  opts.Timeout,
		http:     opts.HTTPClient,
		traced:   traced,
		breakers: newBreakers(opts.Breaker),
	}
}

// BreakerState returns the state of merchant's breaker, "closed", "open"
// or "half-open" ("" names the breaker of calls without a merchant). A
// merchant the Client keeps no breaker for is "closed".
func (c *Client) BreakerState(merchant string) string { return c.breakers.state(merchant) }

// OpenBreakers returns how many breakers are not closed (open or
// half-open), for readiness checks and metrics.
func (c *Client) OpenBreakers() int { return c.breakers.notClosed() }

// CreateCharge charges req under idempotency key key. Send the same key on
// every retry of one logical charge: the provider then charges at most once
// and answers a retry with the original charge.
//
// A charge that was made comes back with a nil error, whether its Status is
// ChargeSucceeded or ChargeDeclined. Errors: ErrNotExecuted (nothing was
// charged; retry at will), ErrUnknownOutcome (maybe charged; retry with the
// same key or call GetChargeByKey), *APIError (refused, e.g. 422
// CodeIdempotencyKeyReused or 400 CodeValidationFailed).
func (c *Client) CreateCharge(ctx context.Context, key string, req ChargeRequest) (Charge, error) {
	var charge Charge
	if err := c.call(ctx, http.MethodPost, "/v1/charges", key, req, &charge); err != nil {
		return Charge{}, err
	}
	return charge, nil
}

// GetChargeByKey returns the charge made under idempotency key key: how a
// reconciler settles an unknown outcome.
//
// Errors: ErrNotFound (no charge was made under key: with no request under
// the key still in flight, it never will be), ErrNotExecuted or
// ErrUnknownOutcome (no answer; a lookup has no effect, so just try again),
// *APIError (refused).
func (c *Client) GetChargeByKey(ctx context.Context, key string) (Charge, error) {
	var charge Charge
	if err := c.call(ctx, http.MethodGet, "/v1/charges?idempotency_key="+url.QueryEscape(key), "", nil, &charge); err != nil {
		return Charge{}, err
	}
	return charge, nil
}

// ListChargesByReference returns every charge made with reference ref,
// oldest first; an empty list when none. Errors as for GetChargeByKey,
// without ErrNotFound.
func (c *Client) ListChargesByReference(ctx context.Context, ref string) ([]Charge, error) {
	var list List[Charge]
	if err := c.call(ctx, http.MethodGet, "/v1/charges?reference="+url.QueryEscape(ref), "", nil, &list); err != nil {
		return nil, err
	}
	return list.Data, nil
}

// ListChargesCreatedAfter returns every charge the provider made after t
// (to the second: what the provider records), oldest first, whoever asked
// for it. It is how a sweep finds, after a database failover, the charges
// made under references the database no longer holds. Errors as for
// GetChargeByKey.
func (c *Client) ListChargesCreatedAfter(ctx context.Context, t time.Time) ([]Charge, error) {
	var list List[Charge]
	if err := c.call(ctx, http.MethodGet, "/v1/charges?created_after="+strconv.FormatInt(t.Unix(), 10), "", nil, &list); err != nil {
		return nil, err
	}
	return list.Data, nil
}

// CreateRefund refunds part or all of a succeeded charge under idempotency
// key key, with the same retry rule as CreateCharge.
//
// A refund that was made comes back with a nil error, whether its Status is
// RefundSucceeded or RefundFailed (FailureCode RefundFailureExceedsCharge:
// more than what is left of the charge). Errors: ErrNotExecuted,
// ErrUnknownOutcome, *APIError (refused: 404 for an unknown charge, which
// also matches ErrNotFound; 400 CodeChargeNotRefundable for a declined one;
// 422 CodeIdempotencyKeyReused; 400 CodeValidationFailed).
func (c *Client) CreateRefund(ctx context.Context, key string, req RefundRequest) (Refund, error) {
	var refund Refund
	if err := c.call(ctx, http.MethodPost, "/v1/refunds", key, req, &refund); err != nil {
		return Refund{}, err
	}
	return refund, nil
}

// GetRefundByKey returns the refund made under idempotency key key. Errors
// as for GetChargeByKey.
func (c *Client) GetRefundByKey(ctx context.Context, key string) (Refund, error) {
	var refund Refund
	if err := c.call(ctx, http.MethodGet, "/v1/refunds?idempotency_key="+url.QueryEscape(key), "", nil, &refund); err != nil {
		return Refund{}, err
	}
	return refund, nil
}

// ListRefundsByReference returns every refund made with reference ref,
// oldest first. Errors as for ListChargesByReference.
func (c *Client) ListRefundsByReference(ctx context.Context, ref string) ([]Refund, error) {
	var list List[Refund]
	if err := c.call(ctx, http.MethodGet, "/v1/refunds?reference="+url.QueryEscape(ref), "", nil, &list); err != nil {
		return nil, err
	}
	return list.Data, nil
}

// ListRefundsCreatedAfter returns every refund the provider made after t,
// oldest first, like ListChargesCreatedAfter.
func (c *Client) ListRefundsCreatedAfter(ctx context.Context, t time.Time) ([]Refund, error) {
	var list List[Refund]
	if err := c.call(ctx, http.MethodGet, "/v1/refunds?created_after="+strconv.FormatInt(t.Unix(), 10), "", nil, &list); err != nil {
		return nil, err
	}
	return list.Data, nil
}

// call runs one request through the breaker of the context's merchant and
// sorts its error.
func (c *Client) call(ctx context.Context, method, target, key string, in, out any) error {
	done, err := c.breakers.get(merchantFrom(ctx)).Allow()
	if err != nil {
		// Open, or half-open with its one trial call already out: fail
		// before touching the network.
		return fmt.Errorf("%w: %w", ErrNotExecuted, ErrCircuitOpen)
	}
	err = c.roundTrip(ctx, method, target, key, in, out)
	done(breakerVerdict(ctx, err))
	return err
}

// breakerVerdict is the error the breaker counts for a call's err: nil for
// any definitive answer, nothing at all when the caller gave up.
func breakerVerdict(ctx context.Context, err error) error {
	if !errors.Is(err, ErrNotExecuted) && !errors.Is(err, ErrUnknownOutcome) {
		return nil
	}
	if ctx.Err() != nil {
		return errCallerGaveUp
	}
	return err
}

// roundTrip sends one request and sorts the result into the three kinds.
func (c *Client) roundTrip(ctx context.Context, method, target, key string, in, out any) error {
	op := method + " " + strings.SplitN(target, "?", 2)[0] // no query: it may hold a key

	var body io.Reader
	if in != nil {
		encoded, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%w: %s: encode request: %w", ErrNotExecuted, op, err)
		}
		body = bytes.NewReader(encoded)
	}

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var gotConn atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+target, body)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotExecuted, op, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		// With this header net/http may itself resend the request on a
		// keep-alive connection that died under it; that is safe precisely
		// because the provider deduplicates by key.
		req.Header.Set("Idempotency-Key", key)
	}

	resp, err := c.http.Do(req)
	if err != nil {
		if c.neverSent(err, gotConn.Load()) {
			return fmt.Errorf("%w: %s: %w", ErrNotExecuted, op, err)
		}
		return fmt.Errorf("%w: %s: %w", ErrUnknownOutcome, op, err)
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	return sortResponse(op, resp.StatusCode, data, readErr, out)
}

// neverSent tells whether a failed request cannot have reached the
// provider. Without a connection nothing was written, so nothing happened.
// Once a connection was had, even a later dial error (net/http retrying on
// a fresh connection) leaves the first attempt in doubt.
func (c *Client) neverSent(err error, gotConn bool) bool {
	if gotConn {
		return false
	}
	if c.traced {
		return true
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return (errors.As(err, &opErr) && opErr.Op == "dial") || errors.As(err, &dnsErr)
}

// sortResponse turns an HTTP answer into a result or one of the three kinds
// of error. The status decides, never the error text.
func sortResponse(op string, status int, data []byte, readErr error, out any) error {
	switch {
	case status >= 200 && status <= 299:
		// Success, but only a complete, sensible body tells us what
		// happened; anything less is an unknown outcome.
		if readErr != nil {
			return fmt.Errorf("%w: %s: read answer: %w", ErrUnknownOutcome, op, readErr)
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%w: %s: decode answer: %w", ErrUnknownOutcome, op, err)
		}
		if checked, ok := out.(interface{ wellFormed() error }); ok {
			if err := checked.wellFormed(); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrUnknownOutcome, op, err)
			}
		}
		return nil
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		// The provider promises that these come before any effect.
		return fmt.Errorf("%w: %s: answered %d: %s", ErrNotExecuted, op, status, problemDetail(data))
	case status >= 500:
		return fmt.Errorf("%w: %s: answered %d: %s", ErrUnknownOutcome, op, status, problemDetail(data))
	case status >= 400:
		return newAPIError(status, data)
	default:
		// 1xx or 3xx: not something the provider's API answers.
		return fmt.Errorf("%w: %s: unexpected status %d", ErrUnknownOutcome, op, status)
	}
}

func newAPIError(status int, data []byte) *APIError {
	var p problem
	if err := json.Unmarshal(data, &p); err != nil || p.Code == "" {
		// Not our problem+json (a proxy's error page, say): keep the status.
		return &APIError{Status: status, Code: "http_" + fmt.Sprint(status), Title: http.StatusText(status)}
	}
	return &APIError{Status: status, Code: p.Code, Title: p.Title, Detail: p.Detail, Errors: p.Errors}
}

// problemDetail extracts a short description from an error body.
func problemDetail(data []byte) string {
	var p problem
	if err := json.Unmarshal(data, &p); err == nil && p.Detail != "" {
		return p.Detail
	}
	return "no problem details"
}
