package idempotency

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"time"
)

// State is where a record is in its life.
type State string

// A record is executing from its reservation until its response is stored;
// a completed record only replays. An expired record is what a store with
// tombstones remembers of a key past its TTL (Store.Tombstone): its
// fingerprint and times, no answer.
const (
	StateExecuting State = "executing"
	StateCompleted State = "completed"
	StateExpired   State = "expired"
)

// PointStarted is the recovery point of a fresh reservation: nothing
// durable has happened yet, so releasing the key deletes the record. A
// recovery point is the last durable step of an operation that spans
// several transactions and the id of what that step made, spelled
// "step:resource" ("payment_created:pay_123"), so that a request taking
// the record over can find it and resume.
const PointStarted = "started"

// FirstFence is the fence of a key's new record, created at created: its
// time in microseconds, not 1. Fences grow across the key's records, so an
// owner of an expired record, paused past its TTL, can never write into
// the key's next record, even when the janitor deleted the old one and
// nothing remembers its fence; within one record, each takeover adds 1.
// Stores give a new record this fence (Store.Insert), or go past the fence
// of the expired record they replace if that is higher.
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
	// Header holds the answer's headers. Only those named in
	// Config.StoredHeaders are stored and replayed with it.
	Header http.Header
	Body   []byte
	// Final says the answer is the operation's outcome: stored with the
	// record and replayed to every retry of the key. An answer that is not
	// final gives the key back (nothing durable happened: a validation
	// error, a 5xx, a provider that did nothing), or, for an operation
	// still under way (a 202), leaves its record open until the outcome is
	// known. A stored answer is final.
	Final bool
}

// success reports whether the answer is a 2xx: the only kind of answer
// whose transaction an Atomic request commits.
func (a Answer) success() bool { return a.Status >= 200 && a.Status < 300 }

// Record is one idempotency key within one scope (in this API, a merchant).
type Record struct {
	// Scope is who the key belongs to: the same key in two scopes is two
	// independent operations.
	Scope       string
	Key         string
	Method      string
	Path        string
	Fingerprint string
	State       State
	// Point is the recovery point (see PointStarted): a request that
	// takes the record over resumes from it.
	Point string
	// Fence is the fencing token: it grows with every new owner, and every
	// write of an owner is conditional on it.
	Fence       int64
	LockedUntil time.Time
	// Answer is the stored answer of a completed record, nil otherwise.
	Answer    *Answer
	CreatedAt time.Time
	UpdatedAt time.Time
	ExpiresAt time.Time

	// sent is, on a record this process completed, the requestDigest of
	// the request as it was sent, so that a retry of the very same bytes is
	// known without canonicalizing its body again; zero on a record read
	// from a store or a cache.
	sent [sha256.Size]byte
}
