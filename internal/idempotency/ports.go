package idempotency

import (
	"context"
	"time"
)

// Store keeps idempotency records and outside calls. Every method joins the
// transaction ctx carries, if any, treats an expired record as absent, and
// may return an error of its own (a lost database), which the caller
// answers as it is, writing nothing more.
type Store interface {
	// Insert reserves rec.Key in rec.Scope by insert-if-absent, replacing
	// an expired record, and sets rec.Fence: FirstFence of rec.CreatedAt,
	// or past the replaced record's. It returns ErrKeyExists.
	Insert(ctx context.Context, rec *Record) error
	// Get returns the live record. It returns ErrNotFound.
	Get(ctx context.Context, scope, key string, now time.Time) (*Record, error)
	// TakeOver hands an executing record whose lock has run out to a new
	// owner: fence seen to seen+1, locked until lockedUntil, in one
	// conditional statement that returns the record as it left it, so the
	// new owner resumes from the latest committed recovery point, not one
	// it read before. It returns ErrFenced when someone else moved first.
	TakeOver(ctx context.Context, scope, key string, seen int64, now, lockedUntil time.Time) (*Record, error)
	// Checkpoint records a recovery point. It returns ErrFenced.
	Checkpoint(ctx context.Context, scope, key string, fence int64, point string, now time.Time) error
	// Complete stores the final answer. It returns ErrFenced.
	Complete(ctx context.Context, scope, key string, fence int64, a Answer, now time.Time) error
	// Release gives the key back after an answer that is not stored: the
	// record is deleted at PointStarted, else unlocked for the next retry
	// to resume at once. It returns ErrFenced.
	Release(ctx context.Context, scope, key string, fence int64, now time.Time) error

	// Tombstone returns what the store remembers of a key whose record
	// expired (the record, or its tombstone) as a Record in StateExpired:
	// fingerprint and times. It returns ErrNotFound, at once for a store
	// that keeps no tombstones.
	Tombstone(ctx context.Context, scope, key string, now time.Time) (*Record, error)

	// InsertCall adds the outside call of a new resource. It returns
	// ErrKeyExists, and the transaction goes on (an answer, not a failure).
	InsertCall(ctx context.Context, c *Call) error
	// LockCall returns the resource's call, locked until the transaction
	// ends. It returns ErrNotFound.
	LockCall(ctx context.Context, scope, id string) (*Call, error)
	// SaveCall writes what moves of a call: its state, intent, attempt,
	// schedule and checks.
	SaveCall(ctx context.Context, c *Call) error
	// CountCalls counts the calls of kind under the client's key made by
	// its earlier records (RecordCreatedAt before recordCreatedAt, or
	// unknown): n of the next derived id (derive.go).
	CountCalls(ctx context.Context, scope, clientKey, kind string, recordCreatedAt time.Time) (int, error)
	// ClaimDue takes up to limit calls due by now, the longest due first
	// and at most perScope of one scope, and moves their DueAt to until in
	// the same statement; it returns them as moved. A call another
	// transaction holds is skipped, not waited for.
	ClaimDue(ctx context.Context, now, until time.Time, limit, perScope int) ([]Call, error)
}

// Transactor opens the transactions of Atomic requests and of the phases
// of an outside call.
type Transactor interface {
	// InTx runs fn with a context carrying a transaction, which the Store
	// and the application's stores join (or the one ctx carries already).
	// It may begin at the first statement, so that decoding and validating
	// hold no connection. It commits when fn returns nil, else rolls back
	// and returns fn's error.
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
	// AfterCommit runs fn once ctx's transaction has committed, never if it
	// rolls back; at once when ctx carries none.
	AfterCommit(ctx context.Context, fn func())
}

// Cache is an optional accelerator in front of the Store (Redis): it holds
// only records committed as completed, until they expire, and any error of
// its own sends the Keeper to the Store. A cache down, slow or flushed
// costs speed, never correctness.
type Cache interface {
	// GetCompleted returns the cached completed record, or ErrNotFound.
	GetCompleted(ctx context.Context, scope, key string) (*Record, error)
	// PutCompleted caches rec (completed, committed) until rec.ExpiresAt.
	PutCompleted(ctx context.Context, rec *Record) error
	// Notify tells every instance that the key's record changed (completed
	// or released), waking its waiters.
	Notify(ctx context.Context, scope, key string) error
	// Subscribe returns a channel that receives after a Notify for the
	// key, from any instance, and its stop; waiters also poll.
	Subscribe(scope, key string) (<-chan struct{}, func())
}

// Limiter bounds how many new keys a scope may start; a request whose key
// has a live record is never refused.
type Limiter interface {
	// AllowNewKey reports whether the scope may start one more key now,
	// and if not, when it may.
	AllowNewKey(ctx context.Context, scope string) (retryAfter time.Duration, ok bool)
}

// Memory keeps completed records in this process (localcache), so that a
// replay here reads neither the Store nor the Cache: a completed record
// never changes until it expires.
type Memory interface {
	// Get returns the live completed record of key in scope, or nil.
	Get(scope, key string, now time.Time) *Record
	// Put keeps rec if it is completed with an answer.
	Put(rec *Record)
}

// noMemory is the Memory of a Keeper given none: it keeps nothing.
type noMemory struct{}

func (noMemory) Get(string, string, time.Time) *Record { return nil }
func (noMemory) Put(*Record)                           {}
