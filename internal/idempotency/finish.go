package idempotency

import (
	"context"
	"errors"
)

// Work outside any request takes a record over as a retry would: the
// reconciler about to settle, re-send or cancel an operation, a webhook
// about to settle one. It claims the record first, so that a retry arriving
// meanwhile waits for it, and one that took the record over first makes the
// claim fail; whatever the claimant then decides, it stores the key's final
// answer under the claim's fence, in the same transaction as the change it
// describes.

// errLocked: a request is running the operation now (its lock holds), or
// someone else claimed it first; it will store the answer itself.
var errLocked = errors.New("idempotency record is locked by a running request")

// claim is an open record taken over for work outside any request. Its
// writes are fenced like an owner's: they fail with ErrFenced once a retry
// has taken the record over (after the claim's lock ran out).
type claim struct {
	k   *Keeper
	rec *Record
}

// claim takes the open record of key over, exactly as a retry takes over
// an abandoned record: the fence goes up and the record is locked for
// LockTimeout. resourceID must be the resource of the record's recovery
// point: a key reused for another operation after its TTL is left alone.
// It returns ErrNotFound (no open record for that operation: nothing can
// resume it), errLocked, or a store error.
func (k *Keeper) claim(ctx context.Context, scope, key, resourceID string) (*claim, error) {
	now := k.clock.Now()
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
	return &claim{k: k, rec: taken}, nil
}

// complete stores a as the claimed record's final answer, in the
// transaction ctx carries, so the answer commits with the change it
// describes, and publishes it to the caches once that commits. It returns
// ErrFenced or a store error.
func (c *claim) complete(ctx context.Context, a Answer) error {
	stored := c.k.cfg.stored(a)
	if err := c.k.store.Complete(ctx, c.rec.Scope, c.rec.Key, c.rec.Fence, stored, c.k.clock.Now()); err != nil {
		return err
	}
	done := *c.rec
	done.State, done.Answer = StateCompleted, &stored
	c.k.cfg.Transactor.AfterCommit(ctx, func() { c.k.published(&done) })
	return nil
}

// check fails with ErrFenced when the claim was lost (a retry took the
// record over after the claim's lock ran out): the claimant must not act.
func (c *claim) check(ctx context.Context) error {
	return c.k.store.Checkpoint(ctx, c.rec.Scope, c.rec.Key, c.rec.Fence, c.rec.Point, c.k.clock.Now())
}

// release gives the record back unchanged and unlocked, for the next retry
// to resume at once: the claimant decided to leave the operation alone. It
// returns ErrFenced or a store error.
func (c *claim) release(ctx context.Context) error {
	if err := c.k.store.Release(ctx, c.rec.Scope, c.rec.Key, c.rec.Fence, c.k.clock.Now()); err != nil {
		return err
	}
	c.k.released(c.rec.Scope, c.rec.Key)
	return nil
}
