package idemcheck

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Config is the endpoint under test and how far the checker may go.
//
// URL, URLVariant, EffectsURL and the bodies may hold placeholders:
// {{unique}} is a new random value for each operation, and Prepare supplies
// any other.
type Config struct {
	// URL is the endpoint under test (absolute http or https).
	URL string
	// Method is the endpoint's method; default POST.
	Method string
	// Header is sent with every request, the effects reads included
	// (credentials, Content-Type). Content-Type defaults to
	// application/json when a body is sent.
	Header http.Header
	// Header2 holds other credentials (another merchant's): its fields
	// replace Header's of the same name. Nil: Credentials is not applicable.
	Header2 http.Header
	// KeyHeader is the name of the key's header; default Idempotency-Key.
	KeyHeader string
	// KeyOptional says the endpoint accepts requests without a key, as
	// Stripe's do: KeyMissing is then not applicable.
	KeyOptional bool
	// FinalStatus lists the statuses besides 2xx, 402 or 409, that the
	// endpoint answers the Body with as the operation's own final outcome
	// and stores (a declined payment, a conflict of the business): the
	// first request so answered is an answer the checks build on, not a
	// failure.
	FinalStatus []int

	// Body is the request's body.
	Body []byte
	// BodyVariant is another valid body for the same endpoint (ReuseBody).
	BodyVariant []byte
	// URLVariant is another path of the API that the same key must not
	// reach (ReusePath): another order's payments, another route.
	URLVariant string
	// MethodVariant is another method for the same URL (ReuseMethod).
	MethodVariant string
	// InvalidBody is a body the endpoint refuses by validation (NoBurn).
	InvalidBody []byte
	// FaultBody is a body the endpoint answers with 5xx, before any effect
	// (No5xxReplay): a payment method the provider fails, for instance.
	FaultBody []byte

	// EffectsURL, when set, is read with GET before and after the requests
	// that may change something; it answers JSON holding a count of the
	// effects (orders created) at EffectsPointer.
	EffectsURL string
	// EffectsPointer is an RFC 6901 JSON pointer to the count: a number, or
	// an array whose length is the count. Empty: the whole document.
	EffectsPointer string

	// Concurrency is how many copies Concurrent sends at once; default 30.
	Concurrency int
	// Pause is how long PauseReplay waits before its replay; default 3s.
	Pause time.Duration
	// LockTimeout is how long the endpoint says a key stays locked by a
	// request that never answered (this project's IDEMPOTENCY_LOCK_TIMEOUT):
	// NoCrashLock fails a key still locked this long (and a grace) after
	// a failure. Default 30s; at most MaxWait.
	LockTimeout time.Duration
	// TTL is how long the endpoint replays a key's answer (this project's
	// IDEMPOTENCY_TTL): ExpiryRace waits this long (and a grace) after a
	// first answer, then sends its copies. Zero: ExpiryRace is not
	// applicable. At most MaxWait, and longer than Pause.
	TTL time.Duration
	// MaxRequests bounds the run: a plan over it is refused, and no request
	// past it is sent. Zero: no bound.
	MaxRequests int
	// AllowEffects must be set for Run to send anything: every check sends
	// requests that a broken endpoint may execute.
	AllowEffects bool

	// Client sends the requests; nil is a client made for the checker
	// (DefaultClient). A given client is used through a copy that never
	// follows redirects.
	Client *http.Client
	// Prepare, when set, is called once per operation and returns the
	// values of the placeholders other than {{unique}}: a fresh order to
	// pay, say. Its own requests are the caller's, outside the plan.
	Prepare func(ctx context.Context) (map[string]string, error)
	// Progress, when set, is told of each request sent and each check
	// started. It is called from one goroutine at a time.
	Progress func(Progress)
}

// Progress is the state of a run, for a progress line.
type Progress struct {
	// Check is the check (or group of checks) running now.
	Check string
	// Step is the 1-based index of the running scenario among Steps.
	Step, Steps int
	// Sent is how many requests were sent so far; Planned the plan's total.
	Sent, Planned int
}

// ErrConfig wraps every error of a Config that cannot be run.
var ErrConfig = errors.New("bad configuration")

// placeholder matches {{name}}.
var placeholder = regexp.MustCompile(`\{\{([A-Za-z0-9_]+)\}\}`)

// withDefaults returns c with its defaults filled, or why it cannot run.
func (c Config) withDefaults() (Config, error) {
	c.fillDefaults()
	if errs := c.problems(); len(errs) > 0 {
		return c, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return c, nil
}

// fillDefaults sets the fields left empty to their defaults, upper-cases
// the methods and gives c its own copies of the headers.
func (c *Config) fillDefaults() {
	if c.Method == "" {
		c.Method = http.MethodPost
	}
	c.Method = strings.ToUpper(c.Method)
	c.MethodVariant = strings.ToUpper(c.MethodVariant)
	if c.KeyHeader == "" {
		c.KeyHeader = "Idempotency-Key"
	}
	if c.Concurrency == 0 {
		c.Concurrency = 30
	}
	if c.Pause == 0 {
		c.Pause = 3 * time.Second
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = 30 * time.Second
	}
	c.Header = c.Header.Clone()
	if c.Header == nil {
		c.Header = http.Header{}
	}
	if c.Header.Get("Content-Type") == "" {
		c.Header.Set("Content-Type", "application/json")
	}
	c.Header2 = c.Header2.Clone()
}

// problems returns every reason c, with its defaults filled, cannot run.
func (c *Config) problems() []error {
	errs := c.urlProblems()
	if c.URL == "" {
		errs = append(errs, errors.New("URL is required"))
	}
	if c.Concurrency < 2 {
		errs = append(errs, fmt.Errorf("concurrency must be 2 or more, got %d", c.Concurrency))
	}
	if c.Pause < 0 || c.MaxRequests < 0 || c.LockTimeout < 0 || c.TTL < 0 {
		errs = append(errs, errors.New("pause, lock timeout, TTL and max requests must not be negative"))
	}
	if c.LockTimeout > MaxWait {
		errs = append(errs, fmt.Errorf("the lock timeout %s is over the %s the checker waits at most: shorten the endpoint's lock timeout in the test environment", c.LockTimeout, MaxWait))
	}
	if c.TTL > MaxWait {
		errs = append(errs, fmt.Errorf("the TTL %s is over the %s the checker waits at most: shorten the endpoint's TTL in the test environment", c.TTL, MaxWait))
	}
	if c.TTL > 0 && c.Pause >= c.TTL {
		errs = append(errs, fmt.Errorf("the pause %s must be shorter than the TTL %s, or pause-replay would replay an expired key", c.Pause, c.TTL))
	}
	for _, st := range c.FinalStatus {
		if st != http.StatusPaymentRequired && st != http.StatusConflict {
			errs = append(errs, fmt.Errorf("final status %d: only 402 and 409 are outcomes an endpoint stores besides 2xx", st))
		}
	}
	if len(c.Header2) > 0 && sameHeaders(c.Header, c.withHeader2(c.Header)) {
		errs = append(errs, errors.New("the other credentials (-H2) are the same as -H's: the credentials check needs another client's"))
	}
	if c.MethodVariant != "" && c.MethodVariant == c.Method {
		errs = append(errs, fmt.Errorf("the method variant must differ from the method %s", c.Method))
	}
	if c.Prepare == nil {
		errs = append(errs, c.placeholderProblems()...)
	}
	return errs
}

// urlProblems returns an error for each URL given that is not an absolute
// http or https URL once its placeholders are filled.
func (c *Config) urlProblems() []error {
	var errs []error
	for name, u := range map[string]string{"URL": c.URL, "URLVariant": c.URLVariant, "EffectsURL": c.EffectsURL} {
		if u == "" {
			continue
		}
		// Placeholders are filled per operation; parse a filled-in copy.
		p, err := url.Parse(placeholder.ReplaceAllString(u, "x"))
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("%s %q is not an absolute http(s) URL", name, RedactURL(u)))
		}
	}
	return errs
}

// placeholderProblems returns an error for each placeholder other than
// {{unique}} in the URLs and bodies, which only a Prepare function fills.
func (c *Config) placeholderProblems() []error {
	var errs []error
	for _, s := range []string{c.URL, c.URLVariant, c.EffectsURL, string(c.Body), string(c.BodyVariant), string(c.InvalidBody), string(c.FaultBody)} {
		for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
			if m[1] != "unique" {
				errs = append(errs, fmt.Errorf("placeholder {{%s}} needs a Prepare function; only {{unique}} is built in", m[1]))
			}
		}
	}
	return errs
}

// withHeader2 returns h with Header2's fields in place of its own.
func (c *Config) withHeader2(h http.Header) http.Header {
	h = h.Clone()
	for name, values := range c.Header2 {
		h[http.CanonicalHeaderKey(name)] = append([]string(nil), values...)
	}
	return h
}

// sameHeaders reports whether two headers hold the same fields and values.
func sameHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for name, va := range a {
		if !slices.Equal(va, b[name]) {
			return false
		}
	}
	return true
}

// DefaultClient is the client the checker uses when Config.Client is nil:
// a 30 s timeout, no redirects followed, and no connection reuse. Reuse is
// off because net/http resends a request that carries an Idempotency-Key
// when a reused connection breaks before the answer; on a fresh connection
// it never does, so every request the checker sends is one it planned.
func DefaultClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableKeepAlives = true
	return &http.Client{Transport: t, Timeout: 30 * time.Second, CheckRedirect: noRedirects}
}

// noRedirects keeps the checker on the URLs it was given: a redirect is an
// answer to judge, not a place to go.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
