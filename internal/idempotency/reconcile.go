package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The reconciler settles the outside calls that no request is settling: an
// unknown outcome (a lost answer, a timeout), an intent whose owner lost
// its record (a crash, a pause), a call abandoned before it reached the
// outside service. Each round claims the calls that are due and drives
// each with the phases a retry runs (settleDue: resume, then drive, whose
// rules for an owner outside a request are in drive's comment and in
// docs/design/operation.md, "One driver"), as the owner of a claim on the
// client's record: a retry arriving meanwhile waits, a request still
// running keeps the call, and the answer is stored under the claim in the
// transaction that settles the call. Several instances may reconcile at
// once: every move is made under the call's row lock, re-checked there,
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

// settler is a registered Effect as the reconciler and an operator drive
// it, whatever its types.
type settler interface {
	settleDue(ctx context.Context, c *Call) (string, error)
	unflag(ctx context.Context, c *Call, accept bool) error
}

// Reconcile runs one round and returns how many calls it settled. It
// claims the due calls nobody holds (ClaimDue: a call whose row an owner
// has locked, or a frozen instance holds, is skipped and comes back next
// round), each for the lock timeout, and gives each at most half of that:
// one stuck call delays the round by that much at most, and is given back
// well before its claim runs out.
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

// Run reconciles the outside calls of registered Effects every
// ReconcileInterval until ctx ends, each round's outcome logged. (The
// janitor, which purges expired records, runs beside it: package janitor.)
func (k *Keeper) Run(ctx context.Context) {
	t := time.NewTicker(k.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := k.Reconcile(ctx); err != nil && ctx.Err() == nil {
			k.cfg.Log.WarnContext(ctx, "reconciler: round failed", "error", err, "settled", n)
		} else if n > 0 {
			k.cfg.Log.InfoContext(ctx, "reconciler: settled outside calls", "settled", n)
		}
	}
}

func (k *Keeper) reconciled(kind, result string) {
	if k.cfg.OnReconcile != nil {
		k.cfg.OnReconcile(kind, result)
	}
}

// settleDue is the reconciler's turn at one due call. It claims the
// client's record as a retry would take it over, and then runs the call
// from where it stands with Run's own phases, as the owner of that claim
// (or of nothing, when no open record names the call): phase 1 stores the
// answer of a call that settled while another held its record; drive asks
// the outside service, and settles, sends again or cancels. A canceled
// call is asked about once more (its late look), for Orphan. It runs in a
// span of its own, linked to the request that made the call.
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
		// A request is working on it: it settles the call, or stores its
		// answer, itself.
		return reconcileUnresolved, k.lookedAt(ctx, seen, false, false)
	case err != nil:
		return reconcileError, err
	case seen.State == CallCalling && !o.holds() && k.now().Before(seen.IntentAt.Add(k.cfg.LockTimeout)):
		// No record to claim: its owner's lock has surely run out only
		// then, and it may still send until it has.
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

// lookedAt puts a call back on the reconciler's list after its turn at it
// (seen, as it was claimed). A call that ended is not looked at again: its
// answer is stored, or nobody's to store, its late look made (but for the
// late look still to come of one this turn canceled). One the turn could
// not settle comes back after a backoff (looked), or, when nobody could
// look (its record running), at its due time anew.
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
