package idempotency

import (
	"context"
	"errors"
	"time"
)

// The Guarded steps. The key is reserved first (StepReserve: an executing
// record with fence 1 and a lock deadline); the handler then runs as the
// record's owner with a Lease in its context, recording recovery points in
// the same transactions as its own durable steps; at the end the answer is
// stored (Complete) or the key given back (Release), conditional on the
// fence. A retry that finds the lock run out takes the record over
// (StepTakeOver) and resumes from the last recovery point; the previous
// owner, if it was only slow, now fails every write with ErrFenced.

// reserve inserts the executing record of a Guarded request and runs it.
// A record found instead is returned to be decided on; one that vanished
// meanwhile (released, expired) lets the loop reserve again.
func (r *run) reserve() (*Record, Result, bool) {
	k := r.k
	ctx, cancel := k.writeContext(r.ctx)
	defer cancel()
	now := k.clock.Now()
	rec := &Record{
		Scope: r.req.Scope, Key: r.req.Key, Method: r.req.Method, Path: r.req.Path,
		Fingerprint: r.req.Fingerprint, State: StateExecuting, Point: PointStarted,
		LockedUntil: now.Add(k.cfg.LockTimeout), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(k.cfg.TTL),
	}
	err := k.store.Insert(ctx, rec)
	switch {
	case err == nil:
		return nil, r.execute(rec.Fence, PointStarted, rec.ExpiresAt, OutcomeExecuted), true
	case errors.Is(err, ErrKeyExists):
		existing, err := r.get()
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, Result{}, false
		case err != nil:
			return nil, refused(err), true
		}
		return existing, Result{}, false
	}
	return nil, refused(err), true
}

// takeOver makes this request the owner of an abandoned record and resumes
// its operation. When another request moved first, the record is read
// again and decided on.
func (r *run) takeOver(rec *Record) (*Record, Result, bool) {
	k := r.k
	ctx, cancel := k.writeContext(r.ctx)
	now := k.clock.Now()
	err := k.store.TakeOver(ctx, r.req.Scope, r.req.Key, rec.Fence, now, now.Add(k.cfg.LockTimeout))
	cancel()
	switch {
	case err == nil:
		return nil, r.execute(rec.Fence+1, rec.Point, rec.ExpiresAt, OutcomeRecovered), true
	case errors.Is(err, ErrFenced):
		return r.reread()
	}
	return nil, refused(err), true
}

// execute runs the handler as the owner of the record (fence) and then
// stores or gives back its answer.
func (r *run) execute(fence int64, point Point, expiresAt time.Time, outcome Outcome) Result {
	k := r.k
	scope, key := r.req.Scope, r.req.Key
	lease := &Lease{k: k, scope: scope, key: key, fence: fence, point: point}
	defer func() {
		if p := recover(); p != nil {
			// The key goes back as after any answer that is not kept.
			// Durable steps commit with their recovery point, so the
			// record says truly how far the operation got.
			ctx, cancel := k.writeContext(r.ctx)
			defer cancel()
			_ = k.store.Release(ctx, scope, key, fence, k.clock.Now())
			panic(p)
		}
	}()
	started := time.Now()
	answer := r.handler(context.WithValue(r.ctx, leaseKey{}, lease), r.req.Body)
	k.obs.Processed(r.ctx, r.req.Route, time.Since(started))

	if lease.stored != nil {
		// An outside call stored the final answer in the transaction that
		// settled it: that is the answer, byte for byte what every replay
		// sends.
		done := &Record{
			Scope: scope, Key: key, Method: r.req.Method, Path: r.req.Path,
			Fingerprint: r.req.Fingerprint, State: StateCompleted, Fence: fence, Answer: lease.stored,
			ExpiresAt: expiresAt,
		}
		k.published(done)
		return fresh(*lease.stored, outcome, done)
	}

	// The answer is stored even if the client has gone.
	ctx, cancel := k.writeContext(r.ctx)
	defer cancel()
	if !answer.Final {
		err := k.store.Release(ctx, scope, key, fence, k.clock.Now())
		if err != nil && !errors.Is(err, ErrFenced) {
			// Most likely the database is away (this answer may well be
			// its 503). Keep trying in the background, so the key is free
			// as soon as the database is back rather than when the lock
			// times out; the write is fenced, so a late one is harmless.
			k.cfg.Log.WarnContext(ctx, "idempotency: release failed; retrying in the background", "error", err)
			k.retryLater(func(ctx context.Context) error {
				return k.store.Release(ctx, scope, key, fence, k.clock.Now())
			})
		}
		k.released(scope, key)
		return fresh(answer, outcome, nil)
	}
	stored := k.cfg.stored(answer)
	err := k.store.Complete(ctx, scope, key, fence, stored, k.clock.Now())
	switch {
	case errors.Is(err, ErrFenced):
		// Another request took the record over while this one ran (our
		// lock had run out). Its answer is the one that will be kept;
		// send the client to fetch it. This request's one outcome is
		// that refusal.
		return refused(k.inProgress())
	case err != nil:
		// The effect happened and the answer is true, but it could not be
		// stored. Keep trying in the background (fenced, so harmless if a
		// retry took over meanwhile); failing that, the record stays at
		// its last recovery point and a retry after the lock timeout
		// resumes there and stores the answer.
		k.cfg.Log.WarnContext(ctx, "idempotency: storing the response failed; retrying in the background", "error", err)
		k.retryLater(func(ctx context.Context) error {
			return k.store.Complete(ctx, scope, key, fence, stored, k.clock.Now())
		})
		return fresh(answer, outcome, nil)
	}
	done := &Record{
		Scope: scope, Key: key, Method: r.req.Method, Path: r.req.Path,
		Fingerprint: r.req.Fingerprint, State: StateCompleted, Fence: fence, Answer: &stored,
		ExpiresAt: expiresAt,
	}
	k.published(done)
	return fresh(answer, outcome, done)
}

// Lease is the ownership of a record held by a Guarded request. The handler
// (through the service) records recovery points with it; every write is
// fenced, so a request that lost the record cannot write.
type Lease struct {
	k          *Keeper
	scope, key string
	fence      int64
	point      Point
	// stored is the final answer an outside call stored with its
	// settlement (see Effect), once that committed.
	stored *Answer
}

// Point is the last durable step recorded for this operation; PointStarted
// for a fresh one.
func (l *Lease) Point() Point { return l.point }

// Fence is the fencing token of this owner.
func (l *Lease) Fence() int64 { return l.fence }

// Checkpoint records p as reached. Call it inside the transaction that makes
// the step durable (the store joins the transaction carried by ctx), so the
// step and its recovery point commit together. It returns ErrFenced when
// another request has taken the record over; roll back then.
func (l *Lease) Checkpoint(ctx context.Context, p Point) error {
	if err := l.k.store.Checkpoint(ctx, l.scope, l.key, l.fence, p, l.k.clock.Now()); err != nil {
		return err
	}
	l.point = p
	return nil
}

type leaseKey struct{}

// LeaseFrom returns the lease of a Guarded request, or nil.
func LeaseFrom(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// ownerFrom is the owner of the record of the request ctx belongs to, or
// nil outside a Guarded request.
func ownerFrom(ctx context.Context) *Lease { return LeaseFrom(ctx) }
