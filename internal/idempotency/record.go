package idempotency

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"time"
)

// State is where a record is in its life.
type State string

// A record is executing until its answer is stored, then completed; an
// expired one is what a store with tombstones remembers of a key past its
// TTL (Store.Get).
const (
	StateExecuting State = "executing"
	StateCompleted State = "completed"
	StateExpired   State = "expired"
)

// PointStarted is the recovery point of a fresh reservation: nothing
// durable yet, so a release deletes the record. A later point names the
// last durable step and what it made, "step:resource"
// ("payment_created:pay_123"), for a takeover to resume from.
const PointStarted = "started"

// FirstFence is the fence of a key's new record created at created: its
// time in microseconds, so that fences grow across the key's records and
// an owner paused past its record's TTL never writes into the next one,
// even once nothing remembers its fence. Each takeover adds 1.
func FirstFence(created time.Time) int64 { return created.UnixMicro() }

// pointOf spells a recovery point.
func pointOf(step, resource string) string { return step + ":" + resource }

// resourceOf is the id a recovery point names; "" for PointStarted.
func resourceOf(point string) string {
	_, resource, _ := strings.Cut(point, ":")
	return resource
}

// Answer is what a keyed request answers: what a handler returns, what the
// adapter writes, and, when Final, what the record stores and replays.
type Answer struct {
	Status int
	// Header holds its headers; those of Config.StoredHeaders are stored.
	Header http.Header
	Body   []byte
	// Final says the answer is the operation's outcome, stored and
	// replayed to every retry. One that is not gives the key back (nothing
	// durable happened), or, for an operation still under way (a 202),
	// leaves the record open until the outcome is known.
	Final bool
}

// success reports a 2xx: the only answer an Atomic request commits with.
func (a Answer) success() bool { return a.Status >= 200 && a.Status < 300 }

// Record is one idempotency key within one scope (in this API, a merchant).
type Record struct {
	// Scope is who the key belongs to (a merchant).
	Scope       string
	Key         string
	Method      string
	Path        string
	Fingerprint string
	State       State
	// Point is the recovery point (PointStarted).
	Point string
	// Fence grows with every new owner; every owner's write is
	// conditional on it.
	Fence       int64
	LockedUntil time.Time
	// Answer is the stored answer of a completed record, nil otherwise.
	Answer    *Answer
	CreatedAt time.Time
	UpdatedAt time.Time
	ExpiresAt time.Time

	// Sent is the requestDigest of the request that made the record, as
	// it was sent (zero if unknown): a retry of the very same bytes needs
	// no canonicalizing.
	Sent [sha256.Size]byte
}
