package idempotency

import (
	"context"
	"time"
)

// Store keeps idempotency records. Every method joins the transaction
// carried by ctx, if any (the Transactor's). A record whose ExpiresAt has
// passed is treated as absent by every method. Any method may also return an
// error of the store's own (a lost database): the caller answers it as it
// is and writes nothing more.
type Store interface {
	// Insert reserves rec.Key in rec.Scope by insert-if-absent (an expired
	// record is replaced). On success it sets rec.Fence: FirstFence of
	// rec.CreatedAt, or one more than the replaced record's if that is
	// not below. It returns ErrKeyExists when a live record holds the key.
	Insert(ctx context.Context, rec *Record) error
	// Get returns the live record. It returns ErrNotFound.
	Get(ctx context.Context, scope, key string, now time.Time) (*Record, error)
	// TakeOver hands an executing record whose lock has run out to a new
	// owner: it bumps the fence from seen to seen+1 and locks the record
	// until lockedUntil, in one conditional statement that returns the
	// record as it left it. The new owner resumes from that record's
	// recovery point, the latest committed: never from one it read before,
	// which the old owner may have moved since (the fence does not move
	// with a checkpoint). It returns ErrFenced when someone else moved
	// first.
	TakeOver(ctx context.Context, scope, key string, seen int64, now, lockedUntil time.Time) (*Record, error)
	// Checkpoint records a recovery point. It returns ErrFenced.
	Checkpoint(ctx context.Context, scope, key string, fence int64, point string, now time.Time) error
	// Complete stores the final answer: its status, body and headers
	// (those of Config.StoredHeaders, which the Keeper has already kept
	// alone). It returns ErrFenced.
	Complete(ctx context.Context, scope, key string, fence int64, a Answer, now time.Time) error
	// Release gives the key back after an answer that is not stored: the
	// record is deleted if nothing durable happened (PointStarted), else
	// unlocked so that the next retry resumes it at once. It returns
	// ErrFenced.
	Release(ctx context.Context, scope, key string, fence int64, now time.Time) error
	// PurgeExpired deletes at most limit records that expired at or before
	// now and returns how many it deleted. A store that keeps tombstones
	// leaves one for each record it deletes, in the same transaction.
	PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error)

	// Tombstone returns what the store remembers of a key whose record has
	// expired: the expired record itself while it is still stored, else the
	// tombstone its purge left, as a Record in StateExpired (fingerprint,
	// CreatedAt, ExpiresAt). It returns ErrNotFound when there is neither,
	// always for a store that keeps no tombstones (which answers without a
	// query). The Keeper asks whenever Get finds no live record.
	Tombstone(ctx context.Context, scope, key string, now time.Time) (*Record, error)
	// PurgeTombstones deletes at most limit tombstones kept past their time
	// and returns how many it deleted; zero for a store without them.
	PurgeTombstones(ctx context.Context, now time.Time, limit int) (int, error)

	// InsertCall adds the outside call of a new resource. It returns
	// ErrKeyExists when the resource has one already, and the transaction
	// it runs in goes on (the clash is an answer, not a failure).
	InsertCall(ctx context.Context, c *Call) error
	// LockCall returns the resource's call and, inside a transaction,
	// locks it until the transaction ends (on SQLite transactions are
	// serialised anyway). It returns ErrNotFound.
	LockCall(ctx context.Context, scope, id string) (*Call, error)
	// SaveCall writes what moves of a call: its state, intent, attempt,
	// schedule and checks.
	SaveCall(ctx context.Context, c *Call) error
	// CountCalls counts the calls of kind made under the client's key in
	// scope by the key's earlier records: those whose RecordCreatedAt is
	// before recordCreatedAt, or unknown. It is the generation of the next
	// derived id (see derive.go), the same for every owner of one record.
	CountCalls(ctx context.Context, scope, clientKey, kind string, recordCreatedAt time.Time) (int, error)
	// ClaimDue takes up to limit calls whose DueAt has come by now, the
	// longest due first and at most perScope of any one scope (one scope's
	// backlog cannot hold another's back), and moves their DueAt to until
	// in the same statement, so that no other reconciler takes them
	// meanwhile; it returns them as moved. A call another transaction holds
	// (an owner at work on it, or frozen with its lock) is skipped, not
	// waited for: it stays due for a later round.
	ClaimDue(ctx context.Context, now, until time.Time, limit, perScope int) ([]Call, error)
}

// Transactor opens the transactions of Atomic requests and of the phases
// of an outside call.
type Transactor interface {
	// InTx runs fn with a context that carries a transaction, which the
	// Store and the application's own stores join; when ctx carries one
	// already, fn joins it and its owner commits. The transaction may
	// begin lazily, at the first statement, so that work done before any
	// statement (decoding, validating) holds no connection. When fn returns
	// nil the transaction commits, else it rolls back and InTx returns fn's
	// error; a failed begin or commit is returned as the store's error.
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
	// AfterCommit runs fn once the transaction ctx carries has committed,
	// and never if it rolls back; at once when ctx carries none.
	AfterCommit(ctx context.Context, fn func())
}

// Cache is an optional accelerator in front of the Store (Redis). The Store
// stays the source of truth: the cache holds only records that were already
// committed as completed, and only until they expire; any cache error makes
// the Keeper fall back to the Store. So a cache that is down, slow or flushed
// costs speed, never correctness.
type Cache interface {
	// GetCompleted returns a cached completed record for the key. It
	// returns ErrNotFound on a miss; any other error means the cache could
	// not answer.
	GetCompleted(ctx context.Context, scope, key string) (*Record, error)
	// PutCompleted caches rec (completed, committed) until rec.ExpiresAt.
	PutCompleted(ctx context.Context, rec *Record) error
	// Notify tells every instance that the record of the key has changed
	// (completed or released), waking the duplicates that wait for it.
	Notify(ctx context.Context, scope, key string) error
	// Subscribe returns a channel that receives after a Notify for the
	// key, from any instance, and a function to stop listening. A cache
	// that cannot deliver simply never sends; waiters also poll.
	Subscribe(scope, key string) (<-chan struct{}, func())
}

// Limiter bounds how many new keys a scope may start. Replays and waits on
// existing keys are never refused: the Keeper reads the record before it
// answers a refusal, and a live record lets the request through.
type Limiter interface {
	// AllowNewKey reports whether the scope may start one more key now,
	// and if not, when it may.
	AllowNewKey(ctx context.Context, scope string) (retryAfter time.Duration, ok bool)
}

// Memory keeps completed records in this process, so that a replay on the
// instance that stored the answer reads neither the store nor the Cache
// (package localcache). A completed record is immutable until it expires,
// so a copy never disagrees with the store.
type Memory interface {
	// Get returns the live completed record of key in scope, or nil.
	Get(scope, key string, now time.Time) *Record
	// Put keeps rec if it is completed with an answer: a record just
	// committed so, or read so from the store or the Cache.
	Put(rec *Record)
}

// noMemory is the Memory of a Keeper given none: it keeps nothing.
type noMemory struct{}

func (noMemory) Get(string, string, time.Time) *Record { return nil }
func (noMemory) Put(*Record)                           {}
