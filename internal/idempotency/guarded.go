package idempotency

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"time"
)

// The Guarded steps (doc.go tells them whole): reserve, execute as the
// record's owner, take an abandoned record over.

// reserve inserts the executing record of a Guarded request and runs it;
// a record found instead is read and decided on.
func (r *run) reserve() (*Record, result, bool) {
	k := r.k
	ctx, cancel := k.writeContext(r.ctx)
	defer cancel()
	now := k.now()
	rec := &Record{
		Scope: r.req.Scope, Key: r.req.Key, Method: r.req.Method, Path: r.req.Path,
		Fingerprint: r.req.Fingerprint, State: StateExecuting, Point: PointStarted, Sent: r.req.sent,
		LockedUntil: now.Add(k.cfg.LockTimeout), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(k.cfg.TTL),
	}
	err := k.store.Insert(ctx, rec)
	switch {
	case err == nil:
		return nil, r.execute(rec, outcomeExecuted), true
	case errors.Is(err, ErrKeyExists):
		return r.reread()
	}
	return nil, refused(err), true
}

// takeOver makes this request the owner of an abandoned record and resumes
// from the record as the takeover left it (rec, read before, only says
// whose fence to take); when another request moved first, it reads again.
func (r *run) takeOver(rec *Record) (*Record, result, bool) {
	k := r.k
	ctx, cancel := k.writeContext(r.ctx)
	now := k.now()
	taken, err := k.store.TakeOver(ctx, r.req.Scope, r.req.Key, rec.Fence, now, now.Add(k.cfg.LockTimeout))
	cancel()
	switch {
	case err == nil:
		return nil, r.execute(taken, outcomeRecovered), true
	case errors.Is(err, ErrFenced):
		return r.reread()
	}
	return nil, refused(err), true
}

// execute runs the handler as the owner of rec, then stores or gives back
// its answer.
func (r *run) execute(rec *Record, outcome string) result {
	k := r.k
	scope, key := r.req.Scope, r.req.Key
	fence, expiresAt := rec.Fence, rec.ExpiresAt
	lease := &Op{k: k, scope: scope, key: key, fence: fence, point: rec.Point, created: rec.CreatedAt}
	defer func() {
		if p := recover(); p != nil {
			// The key goes back as after any answer not kept; durable
			// steps committed with their recovery points.
			ctx, cancel := k.writeContext(r.ctx)
			defer cancel()
			_ = k.store.Release(ctx, scope, key, fence, k.now())
			panic(p)
		}
	}()
	started := time.Now()
	answer := r.guardedWork(r.ctx, lease, r.req.Body)
	k.obs.Processed(r.ctx, r.req.Route, time.Since(started))

	if lease.stored != nil {
		// An outside call stored the final answer (its Effect's Answer of
		// the resource Run returned), which the handler answers too. One
		// that differs is the handler's defect: this client gets the
		// stored one too, as replays do, and the log says so.
		if !sameAnswer(k.cfg.stored(answer), *lease.stored) {
			k.cfg.Log.ErrorContext(r.ctx, "idempotency: the handler's answer differs from the one its outside call stored; sending the stored one",
				"route", r.req.Route, "status", answer.Status, "stored_status", lease.stored.Status)
			answer = *lease.stored
		}
		return r.stored(&answer, outcome, fence, expiresAt, lease.stored)
	}

	if !answer.Final {
		err := k.write(r.ctx, "release", func(ctx context.Context) error {
			return k.store.Release(ctx, scope, key, fence, k.now())
		})
		if errors.Is(err, ErrFenced) {
			// Another request took the record over: its answer counts.
			return refused(ErrInProgress)
		}
		k.cfg.Cache.Changed(scope, key)
		return fresh(&answer, outcome, nil)
	}
	stored := k.cfg.stored(answer)
	switch err := k.write(r.ctx, "storing the response", func(ctx context.Context) error {
		return k.store.Complete(ctx, scope, key, fence, stored, k.now())
	}); {
	case errors.Is(err, ErrFenced):
		// Another request took the record over (our lock had run out):
		// its answer will be kept; send the client to fetch it.
		return refused(ErrInProgress)
	case err != nil:
		// True, but not stored yet: failing the retries, a retry after the
		// lock timeout resumes from the last recovery point and stores it.
		return fresh(&answer, outcome, nil)
	}
	return r.stored(&answer, outcome, fence, expiresAt, &stored)
}

// stored ends a Guarded request whose record holds its final answer: the
// completed record goes to memory, the caches and the queued duplicates.
func (r *run) stored(a *Answer, outcome string, fence int64, expiresAt time.Time, stored *Answer) result {
	done := &Record{
		Scope: r.req.Scope, Key: r.req.Key, Method: r.req.Method, Path: r.req.Path,
		Fingerprint: r.req.Fingerprint, State: StateCompleted, Fence: fence, Answer: stored,
		ExpiresAt: expiresAt, Sent: r.req.sent,
	}
	r.k.published(done)
	return fresh(a, outcome, done)
}

// Op is a Guarded request's operation: its ownership of the key's record
// (fence, lifetime) and how far it got. Keeper.Guarded hands it to the
// handler for Effect.Run, whose phases record their recovery points with
// it; every write is fenced, so an owner that lost the record cannot write.
type Op struct {
	k     *Keeper
	scope string
	// key is the record's Idempotency-Key; empty when the owner holds no
	// record (work outside a request with nothing to claim): then nothing
	// is checkpointed or answered.
	key     string
	fence   int64
	point   string
	created time.Time // the record's CreatedAt (Call.RecordCreatedAt)
	taken   *Record   // the record work outside a request claimed, if any
	stored  *Answer   // the answer an outside call stored, once committed
}

// holds reports whether o owns a record, whose answer it stores.
func (o *Op) holds() bool { return o.key != "" }

// outside reports whether o's work runs outside any request: on a record
// it claimed, or on none.
func (o *Op) outside() bool { return o.taken != nil || !o.holds() }

// checkpoint records p in the transaction that makes the step durable, so
// both commit together. It returns ErrFenced when another request took the
// record over: roll back then.
func (o *Op) checkpoint(ctx context.Context, p string) error {
	if !o.holds() {
		return nil
	}
	if err := o.k.store.Checkpoint(ctx, o.scope, o.key, o.fence, p, o.k.now()); err != nil {
		return err
	}
	o.point = p
	return nil
}

// sameAnswer reports whether a and b are the same answer on the wire:
// status, headers and body.
func sameAnswer(a, b Answer) bool {
	return a.Status == b.Status && bytes.Equal(a.Body, b.Body) &&
		maps.EqualFunc(a.Header, b.Header, slices.Equal[[]string])
}
