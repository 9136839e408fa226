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
	// Get returns the live record or, for a store that keeps tombstones,
	// what it remembers of a key whose record expired, in StateExpired
	// (fingerprint and times). It returns ErrNotFound.
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

// Cache keeps completed records so that a replay reads no Store: this
// process's memory (localcache), Redis for every instance (redisidem), or
// both, memory in front. It also wakes a key's waiters when its record
// changes. A cache down, slow or flushed costs speed, never correctness:
// nothing of it fails a request, and nothing of it blocks one for long.
type Cache interface {
	// Get returns the live completed record of key in scope, or nil (a
	// miss, whatever the cause).
	Get(ctx context.Context, scope, key string, now time.Time) *Record
	// Keep keeps rec, committed as completed, until it expires.
	Keep(rec *Record)
	// Changed wakes the key's waiters on every instance: its record was
	// completed or given back.
	Changed(scope, key string)
	// Subscribe returns a channel that receives after a Changed for the
	// key, and its stop; a nil channel when the cache cannot tell (the
	// waiters poll anyway).
	Subscribe(scope, key string) (<-chan struct{}, func())
}

// noCache is the Cache of a Keeper given none: it keeps nothing.
type noCache struct{}

func (noCache) Get(context.Context, string, string, time.Time) *Record { return nil }
func (noCache) Keep(*Record)                                           {}
func (noCache) Changed(string, string)                                 {}
func (noCache) Subscribe(string, string) (<-chan struct{}, func())     { return nil, func() {} }
