package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The reconciler settles the outside calls no request is settling (an
// unknown outcome, an intent whose owner crashed, a call abandoned before
// it went out): each round claims the due calls and drives each with the
// phases a retry runs, as the owner of a claim on the client's record
// (docs/design/operation.md, "One driver"). Several instances may
// reconcile at once: every move is re-checked under the call's row lock,
// and the outside service deduplicates by key.

// Results of looking at one call, as Config.OnReconcile hears them.
const (
	reconcileResolved   = "resolved"   // the outside service's answer applied
	reconcileUnresolved = "unresolved" // nothing known yet; looked at again later
	reconcileCanceled   = "canceled"   // never reached the outside service; abandoned
	reconcileFlagged    = "flagged"    // the answer failed the money check
	reconcileOrphan     = "orphan"     // an effect for an ended call, undone or flagged by Orphan
	reconcileConfirmed  = "confirmed"  // a canceled call's late look found nothing
	reconcileError      = "error"      // asking, sending or applying failed
)

// settler is a registered Effect as the reconciler drives it.
type settler interface {
	settleDue(ctx context.Context, c *Call) (string, error)
}

// Reconcile runs one round and returns how many calls it settled; the
// application calls it every ReconcileInterval (internal/app's
// reconciler). It claims the due calls nobody holds, each for the lock
// timeout, and gives each at most half of that, so a stuck one is given
// back before its claim runs out.
func (k *Keeper) Reconcile(ctx context.Context) (int, error) {
	now := k.now()
	calls, err := k.store.ClaimDue(ctx, now, now.Add(k.cfg.LockTimeout), reconcileBatch, reconcilePerScope)
	if err != nil {
		k.reconciled("", reconcileError)
		return 0, err
	}
	settled := 0
	var errs []error
	for i := range calls {
		c := &calls[i]
		s, ok := k.kinds.Load(c.Kind)
		if !ok {
			continue // another version's kind: its own instances settle it
		}
		callCtx, cancel := context.WithTimeout(ctx, k.cfg.LockTimeout/2)
		result, err := s.(settler).settleDue(callCtx, c)
		cancel()
		if result != "" {
			k.reconciled(c.Kind, result)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", c.Kind, c.ID, err))
		}
		if result == reconcileResolved || result == reconcileCanceled {
			settled++
		}
	}
	return settled, errors.Join(errs...)
}

func (k *Keeper) reconciled(kind, result string) {
	if k.cfg.OnReconcile != nil {
		k.cfg.OnReconcile(kind, result)
	}
}

// settleDue is the reconciler's turn at one due call: it claims the
// client's record as a retry would take it over, and runs Run's phases as
// the claim's owner (or of nothing, when no open record names the call):
// phase 1 stores the answer of a call settled meanwhile; drive asks the
// outside service, and settles, sends again or cancels. A canceled call is
// asked once more (its late look), for Orphan.
func (e *Effect[R, O]) settleDue(ctx context.Context, seen *Call) (result string, err error) {
	k := e.k
	if k.cfg.Span != nil {
		var end func(error)
		ctx, end = k.cfg.Span(ctx, "reconcile "+e.Kind, seen.TraceParent, e.Kind+".id", seen.ID)
		defer func() { end(err) }()
	}
	o, err := k.claimFor(ctx, seen)
	switch {
	case errors.Is(err, errLocked):
		// A request is at work on it, and stores the answer itself.
		return reconcileUnresolved, k.lookedAt(ctx, seen, false, false)
	case err != nil:
		return reconcileError, err
	case seen.State == CallCalling && !o.holds() && k.now().Before(seen.IntentAt.Add(k.cfg.LockTimeout)):
		// No record to claim: its owner may send until its lock runs out.
		return reconcileUnresolved, k.lookedAt(ctx, seen, false, false)
	}
	defer func() {
		if o.stored != nil {
			return
		}
		if rerr := o.release(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, ErrFenced) {
			k.cfg.Log.WarnContext(ctx, "reconciler: giving a claimed record back failed; it unlocks at its lock timeout",
				"kind", e.Kind, "resource_id", seen.ID, "error", rerr)
		}
	}()
	c, r, err := e.resume(ctx, o, seen.ID)
	result = reconcileResolved
	if err == nil && (!c.State.settled() || seen.State == CallCanceled && c.State == CallCanceled) {
		_, result, err = e.drive(ctx, o, c, r)
	}
	if err != nil {
		result = reconcileError
	}
	if result == reconcileResolved && o.stored != nil {
		k.cfg.Log.InfoContext(ctx, "reconciler: settled an outside call; its answer stored",
			"kind", e.Kind, "scope", seen.Scope, "resource_id", seen.ID)
	}
	ended := err == nil && result != reconcileError && result != reconcileUnresolved
	return result, errors.Join(err, k.lookedAt(ctx, seen, true, ended))
}

// lookedAt puts a call back on the reconciler's list after its turn (seen,
// as claimed): one that ended, never again (but for the late look of one
// just canceled); one not settled after a backoff (looked), or at the next
// round when nobody could look.
func (k *Keeper) lookedAt(ctx context.Context, seen *Call, looked, ended bool) error {
	return k.inTx(ctx, func(ctx context.Context) error {
		c, err := k.store.LockCall(ctx, seen.Scope, seen.ID)
		if err != nil {
			return err
		}
		switch {
		case c.DueAt.IsZero():
			return nil // settled meanwhile, nothing left to do
		case ended && c.State.settled():
			if c.State == CallCanceled && seen.State != CallCanceled {
				return nil // its late look is to come
			}
			c.DueAt = time.Time{}
		case looked || c.State != seen.State:
			c.Checks = seen.Checks
			k.backoff(c)
		default:
			c.DueAt = k.now().Add(k.cfg.ReconcileInterval)
		}
		return k.store.SaveCall(ctx, c)
	})
}
