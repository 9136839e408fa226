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

// reserve inserts the executing record of a Guarded request and runs it.
// A record found instead is returned to be decided on; one that vanished
// meanwhile (released, expired) lets the loop reserve again.
func (r *run) reserve() (*Record, result, bool) {
	k := r.k
	ctx, cancel := k.writeContext(r.ctx)
	defer cancel()
	now := k.now()
	rec := &Record{
		Scope: r.req.Scope, Key: r.req.Key, Method: r.req.Method, Path: r.req.Path,
		Fingerprint: r.req.Fingerprint, State: StateExecuting, Point: PointStarted,
		LockedUntil: now.Add(k.cfg.LockTimeout), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(k.cfg.TTL),
	}
	err := k.store.Insert(ctx, rec)
	switch {
	case err == nil:
		return nil, r.execute(rec, outcomeExecuted), true
	case errors.Is(err, ErrKeyExists):
		existing, err := r.get()
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, result{}, false
		case err != nil:
			return nil, refused(err), true
		}
		return existing, result{}, false
	}
	return nil, refused(err), true
}

// takeOver makes this request the owner of an abandoned record and resumes
// its operation from the record as the takeover left it: rec, read before,
// only says whose fence to take. When another request moved first, the
// record is read again and decided on.
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

// execute runs the handler as the owner of rec, as this request reserved
// or took it over, and then stores or gives back its answer.
func (r *run) execute(rec *Record, outcome string) result {
	k := r.k
	scope, key := r.req.Scope, r.req.Key
	fence, expiresAt := rec.Fence, rec.ExpiresAt
	lease := &Op{k: k, scope: scope, key: key, fence: fence, point: rec.Point, created: rec.CreatedAt}
	defer func() {
		if p := recover(); p != nil {
			// The key goes back as after any answer that is not kept.
			// Durable steps commit with their recovery point, so the
			// record says truly how far the operation got.
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
		// An outside call stored the final answer in the transaction that
		// settled it, built by its Effect's Answer from the resource Run
		// returned; the handler answers with that function of the same
		// resource, so its answer is the one stored. One that is not is a
		// defect of the handler: replays send what was stored, so this
		// client gets that too, and the log says so.
		if !sameAnswer(k.cfg.stored(answer), *lease.stored) {
			k.cfg.Log.ErrorContext(r.ctx, "idempotency: the handler's answer differs from the one its outside call stored; sending the stored one",
				"route", r.req.Route, "status", answer.Status, "stored_status", lease.stored.Status)
			answer = *lease.stored
		}
		return r.stored(&answer, outcome, fence, expiresAt, lease.stored)
	}

	// The answer is stored even if the client has gone.
	ctx, cancel := k.writeContext(r.ctx)
	defer cancel()
	if !answer.Final {
		err := k.store.Release(ctx, scope, key, fence, k.now())
		if errors.Is(err, ErrFenced) {
			// Another request took the record over while this one ran:
			// its answer is the one that counts. Send the client to it.
			return refused(k.inProgress())
		}
		if err != nil {
			// Most likely the database is away (this answer may well be
			// its 503). Keep trying in the background, so the key is free
			// as soon as the database is back rather than when the lock
			// times out; the write is fenced, so a late one is harmless.
			k.cfg.Log.WarnContext(ctx, "idempotency: release failed; retrying in the background", "error", err)
			k.retryLater(func(ctx context.Context) error {
				return k.store.Release(ctx, scope, key, fence, k.now())
			})
		}
		k.released(scope, key)
		return fresh(&answer, outcome, nil)
	}
	stored := k.cfg.stored(answer)
	err := k.store.Complete(ctx, scope, key, fence, stored, k.now())
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
			return k.store.Complete(ctx, scope, key, fence, stored, k.now())
		})
		return fresh(&answer, outcome, nil)
	}
	return r.stored(&answer, outcome, fence, expiresAt, &stored)
}

// stored ends a Guarded request whose record now holds its final answer
// (stored under fence): the completed record goes to memory and the
// caches, and to the duplicates queued behind this request.
func (r *run) stored(a *Answer, outcome string, fence int64, expiresAt time.Time, stored *Answer) result {
	done := &Record{
		Scope: r.req.Scope, Key: r.req.Key, Method: r.req.Method, Path: r.req.Path,
		Fingerprint: r.req.Fingerprint, State: StateCompleted, Fence: fence, Answer: stored,
		ExpiresAt: expiresAt, sent: r.req.sent,
	}
	r.k.published(done)
	return fresh(a, outcome, done)
}

// Op is a Guarded request's operation: its ownership of the key's record
// (the fence, the record's lifetime) and how far it got. Keeper.Guarded
// hands it to the handler, which passes it to Effect.Run; the phases record
// their recovery points with it, and every write is fenced, so a request
// that lost the record cannot write. Only the Keeper makes one.
type Op struct {
	k     *Keeper
	scope string
	// key is the record's Idempotency-Key; empty when the owner holds no
	// record (the reconciler or a webhook at a call whose record is
	// answered, expired or held by a running request, or that the system
	// started itself): then nothing is checkpointed or answered.
	key   string
	fence int64
	point string
	// created is the record's CreatedAt: the lifetime of the key whose
	// calls this owner makes (Call.RecordCreatedAt).
	created time.Time
	// taken is the record work outside any request (the reconciler, a
	// webhook) claimed, if it claimed one.
	taken *Record
	// stored is the final answer an outside call stored with its
	// settlement, once that committed.
	stored *Answer
}

// holds reports whether o owns a record, whose answer it stores.
func (o *Op) holds() bool { return o.key != "" }

// outside reports whether o's work runs outside any request: on a record
// it claimed, or on none. A request's own operation always holds its
// record, and never a taken one.
func (o *Op) outside() bool { return o.taken != nil || !o.holds() }

// checkpoint records p as reached, inside the transaction that makes the
// step durable (the store joins the transaction carried by ctx), so the step
// and its recovery point commit together. It returns ErrFenced when another
// request has taken the record over: roll back then.
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
