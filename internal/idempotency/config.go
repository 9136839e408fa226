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
	DefaultTTL          = 24 * time.Hour
	DefaultLockTimeout  = 30 * time.Second
	DefaultWait         = 2 * time.Second
	DefaultMaxBodyBytes = 1 << 20
)

// Config holds the rules of the contract and the Keeper's collaborators.
// Every field has a default; Store is the only thing New requires.
type Config struct {
	// TTL is how long a record is kept and replayed.
	TTL time.Duration
	// LockTimeout is how long an executing record stays locked to its
	// owner before a retry may take it over.
	LockTimeout time.Duration
	// Wait is how long a duplicate waits for the original to finish before
	// it answers InProgressError.
	Wait time.Duration
	// MaxBodyBytes bounds the body the Keeper reads for the fingerprint;
	// a longer one is a *BodyTooLargeError, read no further.
	MaxBodyBytes int64
	// Limits bound the work of canonicalizing a body.
	Limits Limits
	// Timeouts are the Keeper's own deadlines and hints.
	Timeouts Timeouts
	// StoredHeaders names the headers of a final answer that are stored
	// and replayed with it besides Content-Type, Location, ETag and
	// Last-Modified, which always are: those that describe the result.
	// Never list Set-Cookie, Date, a request or trace id, or Retry-After:
	// they belong to one answer, not to the operation.
	StoredHeaders []string
	// Tombstones on: a key whose record expired executes nothing again
	// (ErrKeyExpired for the same request, ErrKeyReused for another) for as
	// long as the store remembers it (Store.Tombstone; the store must keep
	// tombstones too, gormstore.WithTombstones). Off, an expired key is new.
	Tombstones bool

	// Transactor opens the transaction of Atomic requests; required for
	// Atomic, unused by Guarded.
	Transactor Transactor
	// Clock tells the time of every decision; nil means SystemClock.
	Clock Clock
	// Observer hears every outcome (metrics); nil hears nothing.
	Observer Observer
	// Cache, if set, serves replays and cross-instance wake-ups.
	Cache Cache
	// LocalCacheSize bounds the completed records kept in this process's
	// memory for replays (zero: DefaultLocalCacheSize; negative: none).
	LocalCacheSize int
	// Limiter, if set, bounds how many new keys a scope may start.
	Limiter Limiter
	// Log receives the Keeper's warnings; nil means slog.Default().
	Log *slog.Logger

	// The outside calls of registered Effects (effect.go):

	// KeySecret derives the ids and keys of outside calls from the
	// client's operation (derive.go): the same on every instance, and never
	// changed under a running scheme. Empty means a fixed development
	// secret, fit for development and tests only.
	KeySecret []byte
	// ReconcileInterval is the pause between two rounds of the reconciler
	// (RunReconciler); default 5s.
	ReconcileInterval time.Duration
	// ReconcileBatch bounds the calls one round looks at; default 100.
	ReconcileBatch int
	// CancelAfter is how long a call that never reached the outside
	// service may go without an attempt before the reconciler cancels it
	// (PENDING_CANCEL_AFTER); zero never cancels. It must exceed
	// LockTimeout.
	CancelAfter time.Duration
	// OnReconcile, if set, hears the result of each call the reconciler
	// looks at (ReconcileResolved, …), with the call's kind (metrics).
	OnReconcile func(kind, result string)
	// TraceParent, if set, returns the W3C trace context of ctx, stored
	// with a new call so that the reconciler's work links back to it.
	TraceParent func(ctx context.Context) string
	// Span, if set, starts a span called name with the attribute
	// key=value, a child of ctx's, linked to the trace context link, and
	// returns its end (which marks it failed unless its error is nil).
	Span func(ctx context.Context, name, link, key, value string) (context.Context, func(error))
}

// Timeouts are the deadlines and hints of the Keeper, named so that an
// operator can find and tune them. Zero fields take the defaults given.
type Timeouts struct {
	// Write bounds one write of a record that must finish whatever the
	// client does (a reservation, a stored answer, a release): once the
	// Keeper tries to own a key, a disconnect must not leave it unsure
	// whether it does. Default 10s.
	Write time.Duration
	// Cache bounds one cache call made on a request's path; a slow cache
	// costs at most this before the Store answers. Default 150ms; set it
	// to the cache client's own timeout.
	Cache time.Duration
	// RetryAfter is the hint an InProgressError carries. Default 1s.
	RetryAfter time.Duration
	// PollMin and PollMax bound the growing pause between two reads of a
	// record a duplicate waits for. Defaults 5ms and 200ms.
	PollMin, PollMax time.Duration
	// RetryMin and RetryMax bound the growing pause between two background
	// attempts of a record write that failed (the database was away).
	// Defaults 100ms and 2s.
	RetryMin, RetryMax time.Duration
}

// withDefaults fills the zero fields of c.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.TTL, DefaultTTL)
	def(&c.LockTimeout, DefaultLockTimeout)
	def(&c.Wait, DefaultWait)
	t := &c.Timeouts
	def(&t.Write, 10*time.Second)
	def(&t.Cache, 150*time.Millisecond)
	def(&t.RetryAfter, time.Second)
	def(&t.PollMin, 5*time.Millisecond)
	def(&t.PollMax, 200*time.Millisecond)
	def(&t.RetryMin, 100*time.Millisecond)
	def(&t.RetryMax, 2*time.Second)
	def(&c.ReconcileInterval, 5*time.Second)
	if c.ReconcileBatch <= 0 {
		c.ReconcileBatch = 100
	}
	if len(c.KeySecret) == 0 {
		c.KeySecret = developmentKeySecret
	}
	if c.LocalCacheSize == 0 {
		c.LocalCacheSize = DefaultLocalCacheSize
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	c.Limits = c.Limits.withDefaults()
	// Canonical spellings: net/http writes ETag as Etag.
	stored := []string{"Content-Type", "Location", "Etag", "Last-Modified"}
	for _, h := range c.StoredHeaders {
		if !slices.Contains(stored, http.CanonicalHeaderKey(h)) {
			stored = append(stored, http.CanonicalHeaderKey(h))
		}
	}
	c.StoredHeaders = stored
	if c.Clock == nil {
		c.Clock = SystemClock{}
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
// of StoredHeaders (one value each).
func (c Config) stored(a Answer) Answer {
	h := make(http.Header, len(c.StoredHeaders))
	for _, name := range c.StoredHeaders {
		if v := a.Header.Get(name); v != "" {
			h[name] = []string{v}
		}
	}
	return Answer{Status: a.Status, Header: h, Body: a.Body, Final: true}
}
