package idempotency

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"
)

// Defaults for the settings a Config leaves at zero: the contract's
// IDEMPOTENCY_TTL, IDEMPOTENCY_LOCK_TIMEOUT and IDEMPOTENCY_WAIT, and the
// body limit of MAX_BODY_BYTES.
const (
	defaultTTL          = 24 * time.Hour
	defaultLockTimeout  = 30 * time.Second
	defaultWait         = 2 * time.Second
	defaultMaxBodyBytes = 1 << 20
)

// The Keeper's own deadlines and hints.
const (
	// writeTimeout bounds one record write that must finish whatever the
	// client does (a reservation, a stored answer, a release): once the
	// Keeper tries to own a key, a disconnect must not leave it unsure.
	writeTimeout = 10 * time.Second
	// retryAfter is the hint ErrInProgress carries.
	retryAfter = time.Second
	// reconcileBatch bounds the calls one round of the reconciler claims,
	// reconcilePerScope those of one scope.
	reconcileBatch    = 100
	reconcilePerScope = 10
)

// Config holds the rules of the contract and the Keeper's collaborators.
// Every field has a default; New requires only a Store.
type Config struct {
	// TTL is how long a record is kept and replayed; default 24h.
	TTL time.Duration
	// LockTimeout is how long an executing record stays locked to its
	// owner before a retry may take it over; default 30s.
	LockTimeout time.Duration
	// Wait is how long a duplicate waits for the original before it
	// answers ErrInProgress; default 2s.
	Wait time.Duration
	// MaxBodyBytes bounds the body read for the fingerprint (beyond it, an
	// *http.MaxBytesError); default 1 MiB.
	MaxBodyBytes int64
	// StoredHeaders are the headers of a final answer stored and replayed
	// with it besides Content-Type, Location, ETag and Last-Modified:
	// those that describe the result, never Set-Cookie, Date, a request or
	// trace id, or Retry-After.
	StoredHeaders []string

	// Transactor opens the transactions of Atomic requests and of outside
	// calls; required for both.
	Transactor Transactor
	// Now tells the time of every decision (tests move it); nil means the
	// wall clock, in UTC, to the microsecond.
	Now func() time.Time
	// Observer hears every outcome (metrics); nil hears nothing.
	Observer Observer
	// Cache, if set, serves replays without the Store and wakes waiters
	// (localcache, in front of redisidem for every instance).
	Cache Cache
	// NewKey, if set, is asked once before a new key's work begins (no
	// record found): an error refuses the request, a record found after
	// all is decided on (locallimit.Gate, the quota of new keys).
	NewKey func(ctx context.Context, scope, key string, now time.Time) (*Record, error)
	// Retry, if set, is given a record write outside any transaction (an
	// answer stored, a key given back) that failed other than by ErrFenced,
	// to try again in the background (retrywrite); without it the record
	// waits for its lock timeout, as after a crash.
	Retry func(write func(ctx context.Context) error)
	// Log receives the Keeper's warnings; nil means slog.Default().
	Log *slog.Logger

	// PollMin and PollMax bound the growing pause between two reads of a
	// record a duplicate waits for; defaults 5ms and 200ms.
	PollMin, PollMax time.Duration

	// The outside calls of registered Effects (effect.go):

	// KeySecret derives the ids and keys of outside calls (derive.go), the
	// same on every instance; empty means a development secret, for tests
	// only. PreviousKeySecrets are the secrets it replaced, looked under
	// while their operations may still be retried.
	KeySecret          []byte
	PreviousKeySecrets [][]byte
	// ReconcileInterval is the pause between two rounds of the reconciler
	// (whoever calls Reconcile waits as much: internal/app does), from
	// which a call's backoff grows; default 5s.
	ReconcileInterval time.Duration
	// CancelAfter is how long a call that never reached the outside
	// service may go unattempted before the reconciler cancels it
	// (PENDING_CANCEL_AFTER; zero never). It must exceed LockTimeout.
	CancelAfter time.Duration
	// OnReconcile, if set, hears what became of each call the reconciler
	// looks at, by kind (metrics): resolved, unresolved, canceled, ….
	OnReconcile func(kind, result string)
	// TraceParent, if set, returns ctx's W3C trace context, stored with a
	// new call so that the reconciler's work links back to it.
	TraceParent func(ctx context.Context) string
	// Span, if set, starts a span called name with the attribute
	// key=value, a child of ctx's linked to link, and returns its end.
	Span func(ctx context.Context, name, link, key, value string) (context.Context, func(error))
}

// withDefaults fills the zero fields of c.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.TTL, defaultTTL)
	def(&c.LockTimeout, defaultLockTimeout)
	def(&c.Wait, defaultWait)
	def(&c.PollMin, 5*time.Millisecond)
	def(&c.PollMax, 200*time.Millisecond)
	def(&c.ReconcileInterval, 5*time.Second)
	if len(c.KeySecret) == 0 {
		c.KeySecret = developmentKeySecret
	}
	if c.Cache == nil {
		c.Cache = noCache{}
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = defaultMaxBodyBytes
	}
	// Canonical spellings: net/http writes ETag as Etag.
	stored := []string{"Content-Type", "Location", "Etag", "Last-Modified"}
	for _, h := range c.StoredHeaders {
		if !slices.Contains(stored, http.CanonicalHeaderKey(h)) {
			stored = append(stored, http.CanonicalHeaderKey(h))
		}
	}
	c.StoredHeaders = stored
	if c.Now == nil {
		c.Now = wallClock
	}
	if c.Observer == nil {
		c.Observer = noObserver{}
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// stored is the answer as a record keeps it: final, with only the headers
// of StoredHeaders (one value each). An answer that has no other header,
// as a handler's usually has not, keeps its own map: nothing writes an
// answer's headers once it is returned, only copies them out.
func (c Config) stored(a Answer) Answer {
	if a.Header != nil && c.storable(a.Header) {
		return Answer{Status: a.Status, Header: a.Header, Body: a.Body, Final: true}
	}
	h := make(http.Header, len(c.StoredHeaders))
	values := make([]string, 0, len(c.StoredHeaders)) // one array for all
	for _, name := range c.StoredHeaders {
		if v := a.Header.Get(name); v != "" {
			values = append(values, v)
			h[name] = values[len(values)-1 : len(values) : len(values)]
		}
	}
	return Answer{Status: a.Status, Header: h, Body: a.Body, Final: true}
}

// storable reports whether h holds only headers of StoredHeaders, one
// value each: what stored would copy it to.
func (c Config) storable(h http.Header) bool {
	for name, values := range h {
		if len(values) != 1 || values[0] == "" || !slices.Contains(c.StoredHeaders, name) {
			return false
		}
	}
	return true
}

// wallClock is the time when Config.Now is nil: UTC, truncated to
// microseconds so that a time read back from PostgreSQL (which keeps
// microseconds) compares equal to the one written.
func wallClock() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
