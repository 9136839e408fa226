package idempotency

import (
	"context"
	"time"
)

// State is where a record is in its life.
type State string

// A record is executing from its reservation until its response is stored;
// a completed record only replays.
const (
	StateExecuting State = "executing"
	StateCompleted State = "completed"
)

// PointStarted is the recovery point of a fresh reservation: nothing durable
// has happened yet, so releasing the key deletes the record.
const PointStarted = "started"

// Response is what a finished request answered, as it is stored and replayed.
type Response struct {
	Status      int
	ContentType string
	Location    string
	Body        []byte
}

// Record is one idempotency key of one merchant.
type Record struct {
	MerchantID  string
	Key         string
	Method      string
	Path        string
	Fingerprint string
	State       State
	// RecoveryPoint names the last durable step of an operation that spans
	// several transactions; a request that takes the record over resumes
	// from it.
	RecoveryPoint string
	// Fence is the fencing token: it grows with every new owner, and every
	// write of an owner is conditional on it.
	Fence       int64
	LockedUntil time.Time
	Response    *Response
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ExpiresAt   time.Time
}

// Store keeps idempotency records. Every method joins the transaction carried
// by ctx, if any (see database.WithTx). A record whose ExpiresAt has passed is
// treated as absent by every method.
type Store interface {
	// Insert reserves rec.Key for rec.MerchantID by insert-if-absent (an
	// expired record is replaced). On success it sets rec.Fence. It returns
	// ErrKeyExists when a live record holds the key.
	Insert(ctx context.Context, rec *Record) error
	// Get returns the live record. It returns ErrNotFound.
	Get(ctx context.Context, merchantID, key string, now time.Time) (*Record, error)
	// TakeOver hands an executing record whose lock has run out to a new
	// owner: it bumps the fence from seen to seen+1 and locks the record
	// until lockedUntil. It returns ErrFenced when someone else moved first.
	TakeOver(ctx context.Context, merchantID, key string, seen int64, now, lockedUntil time.Time) error
	// Checkpoint records a recovery point. It returns ErrFenced.
	Checkpoint(ctx context.Context, merchantID, key string, fence int64, point string, now time.Time) error
	// Complete stores the final response. It returns ErrFenced.
	Complete(ctx context.Context, merchantID, key string, fence int64, resp Response, now time.Time) error
	// Release gives the key back after an answer that is not stored: the
	// record is deleted if nothing durable happened (recovery point
	// "started"), else unlocked so that the next retry resumes it at once.
	// It returns ErrFenced.
	Release(ctx context.Context, merchantID, key string, fence int64, now time.Time) error
	// PurgeExpired deletes at most limit records that expired at or before
	// now and returns how many it deleted.
	PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error)
}
