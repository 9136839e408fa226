package idempotency

import (
	"context"
	"errors"
)

// Work outside any request (the reconciler, a webhook's news, an
// operator's ruling) takes a record over as a retry would, and is then an
// Op like a retry's: it stores the key's final answer under its fence, in
// the same transaction as the change it describes.

// errLocked: a request is running the operation now (its lock holds), or
// someone else claimed it first; it will store the answer itself.
var errLocked = errors.New("idempotency record is locked by a running request")

// claim takes the open record of key over, exactly as a retry takes over
// an abandoned record: the fence goes up and the record is locked for
// LockTimeout. resourceID must be the resource of the record's recovery
// point: a key reused for another operation after its TTL is left alone.
// It returns ErrNotFound (no open record for that operation: nothing can
// resume it), errLocked, or a store error.
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
// any request, so that its answer is stored with the settlement. With
// nothing to claim (no client key, no open record naming c: answered,
// expired, another operation's), or when the claim fails, it returns an
// owner that holds no record, and the claim's error: errLocked when a
// request runs the operation now, and will store the answer itself.
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

// complete stores a as the answer of the owner's record, in the
// transaction ctx carries, so the answer commits with the change it
// describes. Once that commits, a request answers with what was stored;
// a claim publishes it to the caches, no request being there to. It
// returns ErrFenced or a store error; an owner without a record stores
// nothing.
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
// retry to resume at once: the claimant decided to leave the operation
// alone, or could not end it. It returns ErrFenced or a store error.
func (o *Op) release(ctx context.Context) error {
	if !o.holds() {
		return nil
	}
	if err := o.k.store.Release(ctx, o.scope, o.key, o.fence, o.k.now()); err != nil {
		return err
	}
	o.k.released(o.scope, o.key)
	return nil
}
