package idempotency

import (
	"context"
	"errors"
)

// Finish stores resp as the final answer of an open record whose operation
// was resolved outside any request (by a reconciler or a webhook), so the
// client's next retry replays it. resourceID must be the resource of the
// record's recovery point (pay_123 for "payment_created:pay_123"): a key
// reused for another operation after its TTL is left alone. It takes the
// record over first, so a request that still believes it owns it is fenced
// out. It returns ErrNotFound (no such open record, or another
// operation's), ErrLocked (a request is running it and will finish it), or
// a store error.
func (k *Keeper) Finish(ctx context.Context, scope, key, resourceID string, resp Response) error {
	now := k.clock.Now()
	rec, err := k.store.Get(ctx, scope, key, now)
	if err != nil {
		return err
	}
	if rec.State != StateExecuting || rec.Point.Resource != resourceID {
		return ErrNotFound
	}
	if rec.LockedUntil.After(now) {
		return ErrLocked
	}
	if err := k.store.TakeOver(ctx, scope, key, rec.Fence, now, now.Add(k.cfg.LockTimeout)); err != nil {
		if errors.Is(err, ErrFenced) {
			return ErrLocked
		}
		return err
	}
	if err := k.store.Complete(ctx, scope, key, rec.Fence+1, resp, now); err != nil {
		return err
	}
	rec.State, rec.Response = StateCompleted, &resp
	k.published(rec)
	return nil
}
