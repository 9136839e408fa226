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
// outside service. Each round takes the calls that are due, the longest due
// first and a few per scope at most (a backlog of one merchant's calls
// cannot delay another's), and settles each as its Effect says:
//
//	calling  whose owner lost its lock   the outcome is unknown (below)
//	unknown                              ask the outside service; if it has no
//	                                     call, send it again under the same key,
//	                                     until it executes
//	ready                                ask; apply what it did; cancel once
//	                                     CancelAfter has passed without an
//	                                     attempt, if it has nothing
//	canceled (with Orphan)               ask once more, CancelAfter later: a
//	                                     call sent without an intent (by an
//	                                     instance of before fencing) may
//	                                     have landed; Orphan undoes it
//
// Before any of that it claims the client's record, as a retry would take
// it over: a retry arriving meanwhile waits, a request still running keeps
// the call (and the call is looked at again later), and the answer is
// stored, under the claim, in the transaction that settles the call.
// Several instances may reconcile at once: every move is made under the
// call's row lock, re-checked there, and the outside service deduplicates
// by key.

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

// Reconcile runs one round and returns how many calls it settled. It
// claims the due calls nobody holds (ClaimDue: a call whose row an owner
// has locked, or a frozen instance holds, is skipped and comes back next
// round), each for the lock timeout, and gives each at most half of that:
// one stuck call delays the round by that much at most, and is given back
// well before its claim runs out.
func (k *Keeper) Reconcile(ctx context.Context) (int, error) {
	now := k.clock.Now()
	calls, err := k.store.ClaimDue(ctx, now, now.Add(k.cfg.LockTimeout), k.cfg.ReconcileBatch, reconcilePerScope)
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
		result, err := s.(settler).reconcile(callCtx, c)
		cancel()
		k.reconciled(c.Kind, result)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", c.Kind, c.ID, err))
		}
		if result == reconcileResolved || result == reconcileCanceled {
			settled++
		}
	}
	return settled, errors.Join(errs...)
}

// reconcilePerScope bounds the calls of one scope in one round.
const reconcilePerScope = 10

// reconcileRound is one round of Run, its outcome logged.
func (k *Keeper) reconcileRound(ctx context.Context) {
	if n, err := k.Reconcile(ctx); err != nil && ctx.Err() == nil {
		k.cfg.Log.WarnContext(ctx, "reconciler: round failed", "error", err, "settled", n)
	} else if n > 0 {
		k.cfg.Log.InfoContext(ctx, "reconciler: settled outside calls", "settled", n)
	}
}

func (k *Keeper) reconciled(kind, result string) {
	if k.cfg.OnReconcile != nil {
		k.cfg.OnReconcile(kind, result)
	}
}

// reconcile settles one due call, in a span of its own linked to the
// request that made it.
func (e *Effect[R, O]) reconcile(ctx context.Context, c *Call) (result string, err error) {
	k := e.k
	if k.cfg.Span != nil {
		var end func(error)
		ctx, end = k.cfg.Span(ctx, "reconcile "+e.Kind, c.TraceParent, e.Kind+".id", c.ID)
		defer func() { end(err) }()
	}
	if c.State == CallCanceled {
		return e.lateLook(ctx, c)
	}
	var cl *claim
	if c.ClientKey != "" {
		cl, err = k.claim(ctx, c.Scope, c.ClientKey, c.ID)
		switch {
		case errors.Is(err, errLocked):
			// A request is working on it: it settles the call, or stores
			// its answer, itself.
			return reconcileUnresolved, e.reschedule(ctx, c, false)
		case errors.Is(err, ErrNotFound):
			cl = nil // no open record: nothing to answer, nothing can resume it
		case err != nil:
			return reconcileError, err
		}
	}
	done := false
	defer func() {
		if cl != nil && !done {
			if rerr := cl.release(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, ErrFenced) {
				k.cfg.Log.WarnContext(ctx, "reconciler: giving a claimed record back failed; it unlocks at its lock timeout",
					"kind", e.Kind, "resource_id", c.ID, "error", rerr)
			}
		}
	}()

	if c.State == CallDone {
		if done, err = e.answerLater(ctx, c, cl); err != nil {
			return reconcileError, errors.Join(err, e.reschedule(ctx, c, true))
		}
		return reconcileResolved, nil
	}
	if c.State == CallCalling {
		// Its owner's lock ran out (the claim took the record) or, with no
		// record, has surely run out by now: the owner may still send, so
		// the outcome is unknown.
		if cl == nil && k.clock.Now().Before(c.IntentAt.Add(k.cfg.LockTimeout)) {
			return reconcileUnresolved, e.reschedule(ctx, c, false)
		}
		if c, err = e.lostOwner(ctx, c); err != nil || c.State.settled() {
			return reconcileUnresolved, err
		}
	}

	r, err := e.Load(ctx, c.Scope, c.ID)
	if err != nil {
		return reconcileError, err
	}
	answer, err := e.Find(ctx, r, c.Key)
	if errors.Is(err, ErrNoSuchCall) && c.State == CallUnknown {
		// Nothing there yet: send it again, under the same key, so that
		// whatever late call is still on its way is deduplicated.
		if err = e.attempt(ctx, c, cl); err == nil {
			answer, err = e.Send(ctx, r, c.Key)
		}
	}
	switch {
	case errors.Is(err, ErrNoSuchCall) && c.State == CallReady:
		if !e.cancelDue(c) {
			return reconcileUnresolved, e.reschedule(ctx, c, true)
		}
		canceled, err := e.cancel(ctx, c, cl)
		if err != nil || !canceled {
			return reconcileUnresolved, errors.Join(err, e.reschedule(ctx, c, true))
		}
		done = cl != nil
		k.cfg.Log.InfoContext(ctx, "reconciler: canceled an operation that never reached the outside service",
			"kind", e.Kind, "scope", c.Scope, "resource_id", c.ID, "attempted_at", c.AttemptedAt)
		return reconcileCanceled, nil
	case errors.Is(err, ErrNoSuchCall):
		return reconcileUnresolved, e.reschedule(ctx, c, true)
	case err != nil:
		// The outside service could not be asked, or did not take the call:
		// looked at again later.
		return reconcileError, errors.Join(err, e.reschedule(ctx, c, true))
	}
	settled, flagged, err := e.settleLater(ctx, c, answer, cl)
	switch {
	case err != nil:
		return reconcileError, errors.Join(err, e.reschedule(ctx, c, true))
	case flagged:
		return reconcileFlagged, nil
	}
	done = settled && cl != nil
	if settled {
		k.cfg.Log.InfoContext(ctx, "reconciler: settled an outside call with the outside service's answer",
			"kind", e.Kind, "scope", c.Scope, "resource_id", c.ID, "answer_stored", done)
	}
	return reconcileResolved, nil
}

// answerLater stores the client's answer of a call that settled while
// another held its record (see settle), under the claim cl: the record was
// still open when its holder's lock ran out. Without a claim (no open
// record: its holder stored the answer, or it expired) there is nothing
// left to store. Either way the call is not looked at again. It reports
// whether it stored the answer.
func (e *Effect[R, O]) answerLater(ctx context.Context, seen *Call, cl *claim) (bool, error) {
	stored := false
	err := e.k.inTx(ctx, func(ctx context.Context) error {
		c, err := e.k.store.LockCall(ctx, seen.Scope, seen.ID)
		if err != nil || c.DueAt.IsZero() {
			return err
		}
		c.DueAt = time.Time{}
		if err := e.k.store.SaveCall(ctx, c); err != nil || cl == nil {
			return err
		}
		r, err := e.Load(ctx, c.Scope, c.ID)
		if err != nil {
			return err
		}
		stored = true
		return e.finish(ctx, c, r, cl)
	})
	return stored, err
}

// lostOwner moves a call whose intent's owner lost its record to unknown,
// under the call's row lock, unless it moved meanwhile.
func (e *Effect[R, O]) lostOwner(ctx context.Context, seen *Call) (*Call, error) {
	var c *Call
	err := e.k.inTx(ctx, func(ctx context.Context) error {
		var err error
		if c, err = e.k.store.LockCall(ctx, seen.Scope, seen.ID); err != nil {
			return err
		}
		if c.State != CallCalling || c.IntentFence != seen.IntentFence {
			return nil
		}
		r, err := e.Load(ctx, c.Scope, c.ID)
		if err != nil {
			return err
		}
		return e.markUnknown(ctx, c, &r)
	})
	return c, err
}

// lateLook asks the outside service, once, about a call canceled
// CancelAfter ago, and hands what it holds to Orphan. A call is canceled
// only when no intent is open, so only a call sent without one (by an
// instance of a version before fencing, or by hand) can land after the
// cancel.
func (e *Effect[R, O]) lateLook(ctx context.Context, seen *Call) (string, error) {
	r, err := e.Load(ctx, seen.Scope, seen.ID)
	if err != nil {
		return reconcileError, err
	}
	answer, err := e.Find(ctx, r, seen.Key)
	found := err == nil
	if err != nil && !errors.Is(err, ErrNoSuchCall) {
		// The outside service could not be asked: asked again later.
		return reconcileError, errors.Join(err, e.k.inTx(ctx, func(ctx context.Context) error {
			c, err := e.k.store.LockCall(ctx, seen.Scope, seen.ID)
			if err != nil || c.State != CallCanceled || c.DueAt.IsZero() {
				return err
			}
			c.Checks = seen.Checks
			e.k.backoff(c)
			return e.k.store.SaveCall(ctx, c)
		}))
	}
	result := reconcileConfirmed
	err = e.k.inTx(ctx, func(ctx context.Context) error {
		c, err := e.k.store.LockCall(ctx, seen.Scope, seen.ID)
		if err != nil || c.State != CallCanceled || c.DueAt.IsZero() {
			return err
		}
		c.DueAt = time.Time{}
		if found {
			if r, err = e.Load(ctx, c.Scope, c.ID); err != nil {
				return err
			}
			orphan, err := e.Orphan(ctx, r, answer)
			if err != nil {
				return err
			}
			if orphan {
				result = reconcileOrphan
			}
		}
		return e.k.store.SaveCall(ctx, c)
	})
	if err != nil {
		return reconcileError, err
	}
	return result, nil
}

// attempt records the reconciler's intent to send an unknown call again:
// the attempt, under the claim's fence when it holds the record.
func (e *Effect[R, O]) attempt(ctx context.Context, seen *Call, cl *claim) error {
	return e.k.inTx(ctx, func(ctx context.Context) error {
		if cl != nil {
			if err := cl.check(ctx); err != nil {
				return err
			}
		}
		c, err := e.k.store.LockCall(ctx, seen.Scope, seen.ID)
		if err != nil {
			return err
		}
		if err := c.move(eventIntent, 0, e.k.clock.Now()); err != nil {
			return err
		}
		c.DueAt = seen.DueAt
		*seen = *c
		return e.k.store.SaveCall(ctx, c)
	})
}

// settleLater applies an answer the reconciler learned, under the call's
// row lock, with the client's answer stored through the claim.
func (e *Effect[R, O]) settleLater(ctx context.Context, seen *Call, answer O, cl *claim) (settled, flagged bool, err error) {
	err = e.k.inTx(ctx, func(ctx context.Context) error {
		c, err := e.k.store.LockCall(ctx, seen.Scope, seen.ID)
		if err != nil {
			return err
		}
		if c.State.settled() {
			return nil
		}
		r, err := e.Load(ctx, c.Scope, c.ID)
		if err != nil {
			return err
		}
		var fin finisher
		if cl != nil {
			fin = cl
		}
		if _, err := e.settle(ctx, c, r, answer, fin); err != nil {
			return err
		}
		settled, flagged = c.State == CallDone, c.State == CallFlagged
		return nil
	})
	return settled, flagged, err
}

// cancelDue reports whether a ready call has gone without an attempt for
// CancelAfter, and may be canceled once the outside service has no call.
func (e *Effect[R, O]) cancelDue(c *Call) bool {
	cfg := e.k.cfg
	return e.Cancel != nil && cfg.CancelAfter > 0 && c.State == CallReady &&
		!c.AttemptedAt.After(e.k.clock.Now().Add(-cfg.CancelAfter))
}

// cancel ends a ready call that never reached the outside service, in one
// transaction that re-checks, under the row lock, that it is still ready
// and due (a retry resuming it first wins), and stores the client's answer
// under the claim. It reports whether it canceled.
func (e *Effect[R, O]) cancel(ctx context.Context, seen *Call, cl *claim) (bool, error) {
	canceled := false
	err := e.k.inTx(ctx, func(ctx context.Context) error {
		c, err := e.k.store.LockCall(ctx, seen.Scope, seen.ID)
		if err != nil {
			return err
		}
		if !e.cancelDue(c) {
			return nil
		}
		r, err := e.Load(ctx, c.Scope, c.ID)
		if err != nil {
			return err
		}
		if r, err = e.Cancel(ctx, r); err != nil {
			return err
		}
		now := e.k.clock.Now()
		if err := c.move(eventCancel, 0, now); err != nil {
			return err
		}
		if e.Orphan != nil {
			c.DueAt = now.Add(e.k.cfg.CancelAfter) // the late look
		}
		if err := e.k.store.SaveCall(ctx, c); err != nil {
			return err
		}
		canceled = true
		if cl == nil {
			return nil
		}
		return cl.complete(ctx, e.Answer(r))
	})
	return canceled, err
}

// reschedule puts a call the reconciler could not settle back on the list:
// later (looked is true: backoff) or at its due time anew.
func (e *Effect[R, O]) reschedule(ctx context.Context, seen *Call, looked bool) error {
	return e.k.inTx(ctx, func(ctx context.Context) error {
		c, err := e.k.store.LockCall(ctx, seen.Scope, seen.ID)
		if err != nil {
			return err
		}
		if c.DueAt.IsZero() {
			return nil // settled meanwhile, nothing left to do
		}
		if looked || c.State != seen.State {
			c.Checks = seen.Checks
			e.k.backoff(c)
		} else {
			c.DueAt = e.k.clock.Now().Add(e.k.cfg.ReconcileInterval)
		}
		return e.k.store.SaveCall(ctx, c)
	})
}
