package idempotency

import (
	"context"
	"errors"
)

// Finish stores a as the final answer of an open record whose operation
// was resolved outside any request (by a reconciler or a webhook), so the
// client's next retry replays it. resourceID must be the resource of the
// record's recovery point (pay_123 for "payment_created:pay_123"): a key
// reused for another operation after its TTL is left alone. It takes the
// record over first, so a request that still believes it owns it is fenced
// out. It returns ErrNotFound (no such open record, or another
// operation's), ErrLocked (a request is running it and will finish it), or
// a store error.
func (k *Keeper) Finish(ctx context.Context, scope, key, resourceID string, a Answer) error {
	c, err := k.Claim(ctx, scope, key, resourceID)
	if err != nil {
		return err
	}
	if err := c.Complete(ctx, a); err != nil {
		return err
	}
	c.Published()
	return nil
}

// Claim takes the open record of key over for work outside any request (a
// reconciler about to settle or cancel the operation), exactly as a retry
// takes over an abandoned record: the fence goes up and the record is locked
// for LockTimeout. A retry that arrives meanwhile waits for the claim, and
// one that took the record over first makes the claim fail; so whatever the
// claimant then decides, inside its own transaction (Claim.Complete joins
// it), no request is resuming the operation at the same time.
//
// resourceID must be the resource of the record's recovery point. It returns
// ErrNotFound (no open record for that operation: nothing can resume it),
// ErrLocked (a request is running it now, or someone else claimed it first),
// or a store error.
func (k *Keeper) Claim(ctx context.Context, scope, key, resourceID string) (*Claim, error) {
	now := k.clock.Now()
	rec, err := k.store.Get(ctx, scope, key, now)
	if err != nil {
		return nil, err
	}
	if rec.State != StateExecuting || rec.Point.Resource != resourceID {
		return nil, ErrNotFound
	}
	if rec.LockedUntil.After(now) {
		return nil, ErrLocked
	}
	if err := k.store.TakeOver(ctx, scope, key, rec.Fence, now, now.Add(k.cfg.LockTimeout)); err != nil {
		if errors.Is(err, ErrFenced) {
			return nil, ErrLocked
		}
		return nil, err
	}
	rec.Fence++
	return &Claim{k: k, rec: rec}, nil
}

// Claim is the ownership of an open record taken by Keeper.Claim. Its
// writes are fenced like a Lease's: they fail with ErrFenced once a retry
// has taken the record over (after the claim's lock ran out).
type Claim struct {
	k   *Keeper
	rec *Record
}

// Complete stores a as the record's final answer, in the transaction
// carried by ctx if there is one, so the answer commits with the change it
// describes. Call Published after that transaction commits. It returns
// ErrFenced or a store error.
func (c *Claim) Complete(ctx context.Context, a Answer) error {
	stored := c.k.cfg.stored(a)
	if err := c.k.store.Complete(ctx, c.rec.Scope, c.rec.Key, c.rec.Fence, stored, c.k.clock.Now()); err != nil {
		return err
	}
	c.rec.State, c.rec.Answer = StateCompleted, &stored
	return nil
}

// Published tells the caches and the waiting duplicates about the answer
// Complete stored, once it has committed.
func (c *Claim) Published() {
	if c.rec.State == StateCompleted {
		c.k.published(c.rec)
	}
}

// check fails with ErrFenced when the claim was lost (a retry took the
// record over after the claim's lock ran out): the claimant must not act.
func (c *Claim) check(ctx context.Context) error {
	return c.k.store.Checkpoint(ctx, c.rec.Scope, c.rec.Key, c.rec.Fence, c.rec.Point, c.k.clock.Now())
}

// Release gives the record back unchanged and unlocked, for the next retry
// to resume at once: the claimant decided to leave the operation alone. It
// returns ErrFenced or a store error.
func (c *Claim) Release(ctx context.Context) error {
	if err := c.k.store.Release(ctx, c.rec.Scope, c.rec.Key, c.rec.Fence, c.k.clock.Now()); err != nil {
		return err
	}
	c.k.released(c.rec.Scope, c.rec.Key)
	return nil
}
