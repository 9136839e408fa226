package idempotency

import (
	"context"
	"errors"
)

// Work outside any request (the reconciler, a webhook, an operator) takes
// a record over as a retry would, and is then an Op like a retry's.

// errLocked: a request runs the operation now, or someone claimed it
// first; it will store the answer itself.
var errLocked = errors.New("idempotency record is locked by a running request")

// claimFor claims the client's record of c for whoever settles c outside
// any request, as a retry takes an abandoned record over, so that the
// answer is stored with the settlement. With no open record whose recovery
// point names c (a key reused after its TTL is left alone), it returns an
// owner of no record; so too when a request holds the record or someone
// claimed it first, with errLocked; or with a store's error.
func (k *Keeper) claimFor(ctx context.Context, c *Call) (*Op, error) {
	none := &Op{k: k, scope: c.Scope}
	if c.ClientKey == "" {
		return none, nil
	}
	now := k.now()
	rec, err := k.store.Get(ctx, c.Scope, c.ClientKey, now)
	switch {
	case errors.Is(err, ErrNotFound):
		return none, nil
	case err != nil:
		return none, err
	case rec.State != StateExecuting || resourceOf(rec.Point) != c.ID:
		return none, nil
	case rec.LockedUntil.After(now):
		return none, errLocked
	}
	taken, err := k.store.TakeOver(ctx, c.Scope, c.ClientKey, rec.Fence, now, now.Add(k.cfg.LockTimeout))
	switch {
	case errors.Is(err, ErrFenced):
		return none, errLocked
	case err != nil:
		return none, err
	}
	return &Op{k: k, scope: c.Scope, key: c.ClientKey, fence: taken.Fence, point: taken.Point, created: taken.CreatedAt,
		taken: taken}, nil
}

// complete stores a as the answer of the owner's record (if any), in ctx's
// transaction, so it commits with the change it describes; then a claim
// publishes it to the caches. It returns ErrFenced or a store error.
func (o *Op) complete(ctx context.Context, a Answer) error {
	if !o.holds() {
		return nil
	}
	stored := o.k.cfg.stored(a)
	if err := o.k.store.Complete(ctx, o.scope, o.key, o.fence, stored, o.k.now()); err != nil {
		return err
	}
	o.k.cfg.Transactor.AfterCommit(ctx, func() {
		o.stored = &stored
		if o.taken != nil {
			done := *o.taken
			done.State, done.Answer = StateCompleted, &stored
			o.k.published(&done)
		}
	})
	return nil
}

// release gives a claimed record back unchanged and unlocked, for the next
// retry to resume at once. It returns ErrFenced or a store error.
func (o *Op) release(ctx context.Context) error {
	if !o.holds() {
		return nil
	}
	if err := o.k.store.Release(ctx, o.scope, o.key, o.fence, o.k.now()); err != nil {
		return err
	}
	o.k.cfg.Cache.Changed(o.scope, o.key)
	return nil
}
