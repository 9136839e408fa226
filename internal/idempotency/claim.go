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

// claim takes the open record of key over as a retry takes over an
// abandoned one, if its recovery point names resourceID (a key reused after
// its TTL is left alone). It returns ErrNotFound, errLocked, or a store
// error.
func (k *Keeper) claim(ctx context.Context, scope, key, resourceID string) (*Op, error) {
	now := k.now()
	rec, err := k.store.Get(ctx, scope, key, now)
	if err != nil {
		return nil, err
	}
	if rec.State != StateExecuting || resourceOf(rec.Point) != resourceID {
		return nil, ErrNotFound
	}
	if rec.LockedUntil.After(now) {
		return nil, errLocked
	}
	taken, err := k.store.TakeOver(ctx, scope, key, rec.Fence, now, now.Add(k.cfg.LockTimeout))
	if err != nil {
		if errors.Is(err, ErrFenced) {
			return nil, errLocked
		}
		return nil, err
	}
	return &Op{k: k, scope: scope, key: key, fence: taken.Fence, point: taken.Point, created: taken.CreatedAt,
		taken: taken}, nil
}

// claimFor claims the client's record of c for whoever settles c outside
// any request, so that the answer is stored with the settlement. With
// nothing to claim, or when the claim fails, it returns an owner of no
// record, and the claim's error (errLocked).
func (k *Keeper) claimFor(ctx context.Context, c *Call) (*Op, error) {
	none := &Op{k: k, scope: c.Scope}
	if c.ClientKey == "" {
		return none, nil
	}
	o, err := k.claim(ctx, c.Scope, c.ClientKey, c.ID)
	switch {
	case errors.Is(err, ErrNotFound):
		return none, nil
	case err != nil:
		return none, err
	}
	return o, nil
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
