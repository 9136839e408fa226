package idempotency

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"mime"
	"net/http"
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
	// Keep decides which answers are stored and replayed; nil means
	// KeepSuccess. An answer that is not kept gives the key back.
	Keep func(Response) bool
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
	if c.LocalCacheSize == 0 {
		c.LocalCacheSize = DefaultLocalCacheSize
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	c.Limits = c.Limits.withDefaults()
	if c.Keep == nil {
		c.Keep = KeepSuccess
	}
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

// KeepSuccess is the default Keep: a success is final and stored, except a
// 202, which says the outcome is not known yet. An application adds its own
// final refusals (a decline, a business conflict) with a Keep of its own,
// usually by status and ProblemCode.
func KeepSuccess(r Response) bool {
	return r.Status >= 200 && r.Status < 300 && r.Status != http.StatusAccepted
}

// Success reports whether the answer is a 2xx: the only kind of answer
// whose transaction an Atomic request commits.
func (r Response) Success() bool { return r.Status >= 200 && r.Status < 300 }

// ProblemCode returns the code member of an RFC 9457 problem answer
// (application/problem+json), or "" for any other answer. A Keep uses it to
// tell a final business conflict from a temporary one of the same status.
func ProblemCode(r Response) string {
	mediaType, _, err := mime.ParseMediaType(r.ContentType)
	if err != nil || mediaType != "application/problem+json" || !bytes.Contains(r.Body, []byte(`"code"`)) {
		return ""
	}
	var p struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(r.Body, &p) != nil {
		return ""
	}
	return p.Code
}
