package idempotency

import (
	"context"
	"errors"
	"fmt"
)

// errNotFlagged: an operator's command named a call that is not flagged.
var errNotFlagged = errors.New("the outside call is not flagged")

// Unflag hands the flagged call (scope, id) back once an operator has
// looked (api flagged retry): it goes back to unknown, and the reconciler's
// next round asks the outside service again and checks its answer anew. It
// returns ErrNotFound, an error when the call is not flagged, or the
// store's.
func (e *Effect[R, O]) Unflag(ctx context.Context, scope, id string) error {
	_, err := e.locked(ctx, scope, id, func(ctx context.Context, c *Call, r *R) error {
		if c.State != CallFlagged {
			return fmt.Errorf("%s %s is %s: %w", e.Kind, c.ID, c.State, errNotFlagged)
		}
		return e.markUnknown(ctx, c, r, eventRetry)
	})
	return err
}

// Overrule ends the flagged call (scope, id) with ruling, a definitive
// answer an operator vouches for: applied without the money check (Settle),
// the call done, and the client's answer stored, in one transaction. held
// is what the outside service holds for the call; once the ruling is
// applied it goes to Orphan, in a transaction of its own: an effect the
// ruling says never happened (a wrong charge under our key, for a payment
// the operator failed) is undone the way an orphan is, through a call of
// its own. An operator accepting the outside service's answer (api flagged
// accept) rules held itself. It returns the resource as ruled, or ErrNotFound, an error when
// the call is not flagged, or Settle's, Orphan's and the store's errors.
func (e *Effect[R, O]) Overrule(ctx context.Context, scope, id string, ruling, held O) (R, error) {
	r, err := e.locked(ctx, scope, id, func(ctx context.Context, c *Call, r *R) (err error) {
		if c.State != CallFlagged {
			return fmt.Errorf("%s %s is %s: %w", e.Kind, c.ID, c.State, errNotFlagged)
		}
		if *r, err = e.Settle(ctx, *r, ruling); err != nil {
			return err
		}
		if err := c.move(eventAccept, 0, e.k.now()); err != nil {
			return err
		}
		if err := e.k.store.SaveCall(ctx, c); err != nil {
			return err
		}
		o, _ := e.k.claimFor(ctx, c) // unclaimed: nobody's answer to store, or a request stores it
		return e.finish(ctx, o, c, *r)
	})
	if err != nil {
		return r, err
	}
	return e.locked(ctx, scope, id, func(ctx context.Context, c *Call, r *R) error {
		_, err := e.orphaned(ctx, c, *r, held)
		return err
	})
}
