package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"
)

// Config holds the timing rules of the contract.
type Config struct {
	// TTL is how long a record is kept and replayed.
	TTL time.Duration
	// LockTimeout is how long an executing record stays locked to its owner
	// before a retry may take it over.
	LockTimeout time.Duration
	// Wait is how long a duplicate waits for the original to finish before it
	// answers ErrInProgress.
	Wait time.Duration
	// MaxBodyBytes bounds the body read for the fingerprint.
	MaxBodyBytes int64
	// Observer hears every decision (metrics); nil hears nothing.
	Observer Observer
	// Cache, if set, serves replays and cross-instance wake-ups (Redis);
	// the Store stays the source of truth.
	Cache Cache
	// Limiter, if set, bounds how many new keys a merchant may start.
	Limiter Limiter
}

// ErrorRenderer writes the answer for an error of this package (or of the
// store) and aborts the request. The HTTP layer owns the mapping to
// problem+json.
type ErrorRenderer func(c *gin.Context, err error)

// MerchantFunc returns the authenticated merchant of a request; the key is
// scoped to it.
type MerchantFunc func(c *gin.Context) string

// Keeper is the idempotency middleware. Routes opt in with Atomic or Guarded.
type Keeper struct {
	store    Store
	db       *gorm.DB
	clock    Clock
	cfg      Config
	merchant MerchantFunc
	render   ErrorRenderer
	log      *slog.Logger
	flights  *flights
	obs      Observer
	cache    Cache
}

// NewKeeper builds the middleware. db is used to open the transaction of
// Atomic routes; store must work on the same database.
func NewKeeper(store Store, db *gorm.DB, clock Clock, cfg Config, merchant MerchantFunc, render ErrorRenderer, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.Default()
	}
	obs := cfg.Observer
	if obs == nil {
		obs = noObserver{}
	}
	return &Keeper{store: store, db: db, clock: clock, cfg: cfg, merchant: merchant, render: render, log: log, flights: newFlights(), obs: obs, cache: cfg.Cache}
}

// Lease is the ownership of a record held by a Guarded request. The handler
// (through the service) records recovery points with it; every write is
// fenced, so a request that lost the record cannot write.
type Lease struct {
	store      Store
	clock      Clock
	merchantID string
	key        string
	fence      int64
	point      string
}

// RecoveryPoint is the last durable step recorded for this operation;
// PointStarted for a fresh one.
func (l *Lease) RecoveryPoint() string { return l.point }

// Fence is the fencing token of this owner.
func (l *Lease) Fence() int64 { return l.fence }

// Checkpoint records point as reached. Call it inside the transaction that
// makes the step durable (the store joins the transaction carried by ctx),
// so the step and its recovery point commit together. It returns ErrFenced
// when another request has taken the record over; roll back then.
func (l *Lease) Checkpoint(ctx context.Context, point string) error {
	if err := l.store.Checkpoint(ctx, l.merchantID, l.key, l.fence, point, l.clock.Now()); err != nil {
		return err
	}
	l.point = point
	return nil
}

type leaseKey struct{}

// LeaseFrom returns the lease of a Guarded request, or nil.
func LeaseFrom(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// ErrLocked: Finish found the record held by a running request, which will
// store the answer itself.
var ErrLocked = errors.New("idempotency record is locked by a running request")

// Finish stores resp as the final answer of an open record whose operation
// was resolved outside any request (by a reconciler or a webhook), so the
// client's next retry replays it. resourceID must be the suffix of the
// record's recovery point ("payment_created:pay_123" for pay_123): a key
// reused for another operation after its TTL is left alone. It takes the
// record over first, so a request that still believes it owns it is fenced
// out. It returns ErrNotFound (no such open record, or another operation's),
// ErrLocked (a request is running it and will finish it), or a store error.
func (k *Keeper) Finish(ctx context.Context, merchantID, key, resourceID string, resp Response) error {
	now := k.clock.Now()
	rec, err := k.store.Get(ctx, merchantID, key, now)
	if err != nil {
		return err
	}
	if rec.State != StateExecuting || !strings.HasSuffix(rec.RecoveryPoint, ":"+resourceID) {
		return ErrNotFound
	}
	if rec.LockedUntil.After(now) {
		return ErrLocked
	}
	if err := k.store.TakeOver(ctx, merchantID, key, rec.Fence, now, now.Add(k.cfg.LockTimeout)); err != nil {
		if errors.Is(err, ErrFenced) {
			return ErrLocked
		}
		return err
	}
	if err := k.store.Complete(ctx, merchantID, key, rec.Fence+1, resp, now); err != nil {
		return err
	}
	rec.State, rec.Response = StateCompleted, &resp
	k.published(ctx, rec)
	return nil
}
