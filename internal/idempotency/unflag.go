package idempotency

import (
	"context"
	"errors"
	"fmt"
)

// errNotFlagged: Unflag named a call that is not flagged.
var errNotFlagged = errors.New("the outside call is not flagged")

// Unflag hands a flagged call back once an operator has looked (api
// flagged). With accept false, the call goes back to unknown and the
// reconciler's next round asks the outside service again and checks its
// answer anew: after the operator corrected what differed, on our side or
// the outside service's. With accept true, the outside service's answer is
// applied as it is, without the money check (the operator vouches for it),
// and the client's answer is stored. It returns ErrNotFound when the scope
// has no such call, an error when the call is not flagged, or the outside
// service's and the store's errors.
func (k *Keeper) Unflag(ctx context.Context, scope, id string, accept bool) error {
	c, err := k.store.LockCall(ctx, scope, id)
	if err != nil {
		return err
	}
	s, ok := k.kinds.Load(c.Kind)
	if !ok {
		return fmt.Errorf("outside call %s is of kind %q, which this program does not register", id, c.Kind)
	}
	return s.(settler).unflag(ctx, c, accept)
}

func (e *Effect[R, O]) unflag(ctx context.Context, seen *Call, accept bool) error {
	var answer O
	if accept {
		r, err := e.Load(ctx, seen.Scope, seen.ID)
		if err != nil {
			return err
		}
		if answer, err = e.Find(ctx, r, seen.Key); err != nil {
			return fmt.Errorf("ask the outside service about %s %s: %w", e.Kind, seen.ID, err)
		}
	}
	return e.k.inTx(ctx, func(ctx context.Context) error {
		c, err := e.k.store.LockCall(ctx, seen.Scope, seen.ID)
		if err != nil {
			return err
		}
		if c.State != CallFlagged {
			return fmt.Errorf("%s %s is %s: %w", e.Kind, c.ID, c.State, errNotFlagged)
		}
		r, err := e.Load(ctx, c.Scope, c.ID)
		if err != nil {
			return err
		}
		now := e.k.clock.Now()
		if !accept {
			if err := c.move(eventRetry, 0, now); err != nil {
				return err
			}
			if e.Unknown != nil {
				if _, err := e.Unknown(ctx, r); err != nil {
					return err
				}
			}
			e.k.schedule(c)
			return e.k.store.SaveCall(ctx, c)
		}
		if r, err = e.Settle(ctx, r, answer); err != nil {
			return err
		}
		if err := c.move(eventAccept, 0, now); err != nil {
			return err
		}
		if err := e.k.store.SaveCall(ctx, c); err != nil {
			return err
		}
		var fin finisher
		if cl := e.k.claimFor(ctx, c); cl != nil {
			fin = cl
		}
		return e.finish(ctx, c, r, fin)
	})
}
