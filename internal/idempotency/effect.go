package idempotency

import (
	"context"
	"errors"
	"fmt"
)

// Effect describes one kind of operation whose effect is outside the
// database: a charge, a refund, a fork's receipt mailed through a mail
// service. R is the application's resource (a payment), O the outside
// service's definitive answer (the charge it made, or its decline).
//
// The core runs such an operation in phases (Run), each one transaction
// that moves the key's recovery point, with the outside call between two of
// them; it settles later whatever the request could not (the reconciler,
// Apply for a webhook's news), and stores the client's answer when it
// does. The application says what each phase does to its own rows:
//
//	phase 1  create or resume   create (Run's argument), or Load
//	phase 2  intent             the core alone: calling, under the fence
//	         the call           Send, under the call's key
//	phase 3  settle             Check, then Settle; or Unknown
//
// Every field but Unknown and Cancel is required.
type Effect[R, O any] struct {
	// Kind names the kind: the purpose of its derived keys, the step of
	// its recovery points ("payment" → "payment_created:pay_…"), its rows
	// of outside_calls.
	Kind string
	// Prefix starts the ids of its resources ("pay_").
	Prefix string
	// Load reads the resource, in the phase's transaction when ctx
	// carries one.
	Load func(ctx context.Context, scope, id string) (R, error)
	// Send makes the outside call under key. Its error sorts the outcome:
	// nil is a definitive answer; wrapping ErrNotExecuted, the call did
	// nothing; anything else, its outcome is unknown.
	Send func(ctx context.Context, r R, key string) (O, error)
	// Find asks the outside service about the call made under key. It
	// returns ErrNoSuchCall when there is none; other errors as Send's.
	Find func(ctx context.Context, r R, key string) (O, error)
	// Check holds a definitive answer to the resource: what the outside
	// service did (amount, currency, the resource it names) must be what
	// we asked. It returns ErrMismatch (wrapped, with the difference), and
	// then nothing is applied and the call is flagged.
	Check func(r R, o O) error
	// Settle applies a definitive answer that passed Check to the
	// resource, in the phase's transaction.
	Settle func(ctx context.Context, r R, o O) (R, error)
	// Unknown, if set, marks the resource as waiting for an unknown
	// outcome, in the phase's transaction (a payment shows processing).
	Unknown func(ctx context.Context, r R) (R, error)
	// Cancel, if set, ends a resource whose call never reached the outside
	// service and was abandoned, in the cancel's transaction. Without it
	// such a resource waits for its client's retry forever.
	Cancel func(ctx context.Context, r R) (R, error)
	// Answer is what the client is told about the resource as it stands:
	// what a request answers, and what the core stores when the outcome
	// settles later.
	Answer func(r R) Answer
	// Orphan, if set, hears a definitive answer for a call that has ended
	// (done, or canceled): the outside service holds an effect for an
	// operation we consider over. It reports whether that effect is one
	// nobody asked for (a succeeded charge for a payment canceled or
	// declined) and, if so, undoes it (another Effect's Start) or flags it,
	// and logs it with the ids, in the transaction that heard it and under
	// the call's row lock: told twice, it acts once. Who hears: a webhook
	// (Apply), a request's own late answer, and the reconciler, which asks
	// once more about every call it canceled, CancelAfter later.
	Orphan func(ctx context.Context, r R, o O) (bool, error)

	k *Keeper
}

// Errors of an outside call, for an Effect's functions to return and its
// callers to sort by.
var (
	// ErrNotExecuted: the outside service did nothing (it refused before
	// any effect, answered 503, or was never reached). Trying again under
	// the same key is safe.
	ErrNotExecuted = errors.New("the outside call was not executed")
	// ErrNoSuchCall: the outside service has no call under the key.
	ErrNoSuchCall = errors.New("the outside service has no call under this key")
	// ErrMismatch: the outside service's answer is not what we asked for.
	ErrMismatch = errors.New("the outside service's answer differs from ours")
)

// errNoOwner: Effect.Run was given no operation (Op): only a Guarded
// request's handler gets one, the owner of a record to run an outside call
// under. A wiring mistake, so it is not part of the API's errors.
var errNoOwner = errors.New("idempotency: no operation owns a record; is the route Guarded?")

// Register makes e known to k: its calls are settled by k's reconciler and
// their answers stored by k, whoever learns the outcome. Register it once,
// at start, before k serves requests; it returns e, bound to k.
func Register[R, O any](k *Keeper, e Effect[R, O]) *Effect[R, O] {
	switch {
	case e.Kind == "" || e.Prefix == "":
		panic("idempotency: an Effect needs a Kind and a Prefix")
	case e.Load == nil || e.Send == nil || e.Find == nil || e.Check == nil || e.Settle == nil || e.Answer == nil:
		panic("idempotency: Effect " + e.Kind + " needs Load, Send, Find, Check, Settle and Answer")
	case k.cfg.Transactor == nil:
		panic("idempotency: outside calls need Config.Transactor")
	}
	e.k = k
	k.kinds.Store(e.Kind, settler(&e))
	return &e
}

// Run runs op, a Guarded request's operation (Keeper.Guarded hands it to the
// handler; an error for nil), as the owner of its record:
//
//   - phase 1, one transaction: resume the resource the record's recovery
//     point names, or make it: create gets the call's id and key, derived
//     from the request's key (see derive.go), and writes the resource;
//   - phase 2, one transaction: record the intent to call, under the
//     owner's fence (a request that lost its record calls nothing);
//   - the call, outside any transaction, under the call's key;
//   - phase 3, one transaction: a definitive answer is checked and
//     settled and the client's answer stored with it; "not executed"
//     closes this owner's intent; an unknown outcome is recorded.
//
// It returns the resource as it stands, settled or not (the answer is
// e.Answer's; once the call went out, a phase 3 that fails leaves it as
// phase 2 did, its outcome unknown), or: an error wrapping ErrNotExecuted
// when nothing can have happened (the call is ready again, and the same key
// resumes it); ErrFenced when another owner took the record over; before
// the call, create's and the store's errors.
func (e *Effect[R, O]) Run(ctx context.Context, op *Op, create func(ctx context.Context, c Call) (R, error)) (R, error) {
	var zero R
	if op == nil {
		return zero, errNoOwner
	}
	// A client that hangs up must not cut the work short: an abandoned
	// call is exactly the unknown outcome this design avoids.
	ctx = context.WithoutCancel(ctx)

	secret, err := e.secret(ctx, op)
	if err != nil {
		return zero, err
	}
	c, r, err := e.begin(ctx, op, secret, create)
	if err != nil || c.State.settled() {
		return r, err
	}
	r, _, err = e.drive(ctx, op, c, r)
	return r, err
}

// drive runs phases 2 and 3 of the call c of resource r for o, the
// request's owner or the reconciler's claim: the intent, the call, and
// what came of it. Outside a request (the reconciler) the outside service
// is asked first, and what it holds settles the call; a call it does not
// hold is sent again only when its outcome is unknown (a ready call is its
// client's to send, and is canceled once CancelAfter has passed; a
// canceled call's late look ends there). It returns the resource as it
// stands and, for the reconciler, how the call ended (reconcile*; empty
// when the ending told the observer itself).
func (e *Effect[R, O]) drive(ctx context.Context, o *Op, c *Call, r R) (R, string, error) {
	if o.outside() {
		answer, err := e.Find(ctx, r, c.Key)
		switch {
		case err == nil:
			return e.answered(ctx, o, c.ID, answer)
		case !errors.Is(err, ErrNoSuchCall):
			return r, reconcileError, err
		case c.State == CallReady:
			return e.cancel(ctx, o, c.ID)
		case c.State == CallCanceled:
			return r, reconcileConfirmed, nil
		}
	}
	c, r, err := e.intend(ctx, o, c)
	if err != nil || c.State.settled() {
		return r, reconcileResolved, err
	}
	answer, err := e.Send(ctx, r, c.Key)
	var (
		settled R
		result  = reconcileError // for the reconciler, a send that did not settle failed
	)
	switch {
	case err == nil:
		settled, result, err = e.answered(ctx, o, c.ID, answer)
	case errors.Is(err, ErrNotExecuted):
		if settled, err = e.notExecuted(ctx, o, c.ID, err); errors.Is(err, ErrNotExecuted) {
			return settled, result, err
		}
	default:
		settled, err = e.unknown(ctx, o, c.ID)
	}
	if err != nil && !errors.Is(err, ErrFenced) {
		// The call went out, and phase 3 could not write what came of it
		// (the database away, a row held past the lock timeout): nothing
		// of phase 3 committed, the intent stays open, and the reconciler
		// settles the call once this owner's lock has run out. The client
		// is told what is true, that the outcome is not known yet (the
		// resource as phase 2 left it), never that nothing was done.
		e.k.cfg.Log.WarnContext(ctx, "idempotency: the outside call's outcome could not be recorded; the reconciler settles it",
			"kind", e.Kind, "resource_id", c.ID, "error", err)
		return r, reconcileError, nil
	}
	return settled, result, err
}

// Apply applies news of the outside call of the resource (scope, id) that
// arrived outside any request (a webhook the outside service confirmed):
// checked and settled as a request would, with the client's answer stored,
// in the transaction ctx carries if any. It returns the resource and what
// became of the news:
//
//	"applied"  the answer settled the call
//	"repeat"   the call had ended already; nothing changed
//	"flagged"  the answer failed the money check: nothing applied, the call
//	           flagged (which commits with the caller's transaction)
//	"orphan"   the call had ended without the effect the answer reports:
//	           Orphan undid or flagged it
//
// It returns ErrNotFound when the resource has no call, or the store's,
// Settle's and Orphan's errors.
func (e *Effect[R, O]) Apply(ctx context.Context, scope, id string, answer O) (r R, outcome string, err error) {
	r, err = e.locked(ctx, scope, id, func(ctx context.Context, c *Call, r *R) (err error) {
		if c.State.settled() {
			outcome = applyRepeat
			orphan, err := e.orphaned(ctx, c, *r, answer)
			if orphan {
				outcome = applyOrphan
			}
			return err
		}
		o, _ := e.k.claimFor(ctx, c) // unclaimed: a running request stores the answer, or nobody can
		if *r, err = e.settle(ctx, o, c, *r, answer); err != nil {
			return err
		}
		outcome = applyApplied
		if c.State == CallFlagged {
			// Nothing is answered for good: the record goes back, open.
			outcome = applyFlagged
			return o.release(ctx)
		}
		return nil
	})
	return r, outcome, err
}

// Apply's outcomes.
const (
	applyApplied = "applied"
	applyRepeat  = "repeat"
	applyFlagged = "flagged"
	applyOrphan  = "orphan"
)

// Start begins an operation the system starts itself, without a client or
// a record (the refund of an orphan charge): its id and key are derived
// from scope and seed (the orphan charge's id), so whoever starts it again
// finds the one already started, and nothing more happens. In the
// transaction ctx carries, or one of its own, create writes the resource;
// the call starts unknown, so the reconciler sends it at its next round and
// sends it again, under the same key, until the outside service executes
// it. It returns the resource, and whether this call started it (false:
// found, started before).
func (e *Effect[R, O]) Start(ctx context.Context, scope, seed string, create func(ctx context.Context, c Call) (R, error)) (r R, started bool, err error) {
	err = e.k.inTx(ctx, func(ctx context.Context) error {
		id := deriveID(e.k.cfg.KeySecret, e.Prefix, scope, seed, e.Kind, startedN)
		_, err := e.k.store.LockCall(ctx, scope, id)
		switch {
		case err == nil:
			r, err = e.Load(ctx, scope, id)
			return err
		case !errors.Is(err, ErrNotFound):
			return err
		}
		started = true
		now := e.k.now()
		c := &Call{Scope: scope, ID: id, Kind: e.Kind, Key: id, KeyVersion: keyVersion, KeyFingerprint: KeyFingerprint(e.k.cfg.KeySecret),
			State: CallUnknown, AttemptedAt: now, CreatedAt: now, UpdatedAt: now}
		if e.k.cfg.TraceParent != nil {
			c.TraceParent = e.k.cfg.TraceParent(ctx)
		}
		e.k.schedule(c)
		if r, err = create(ctx, *c); err != nil {
			return err
		}
		return e.k.store.InsertCall(ctx, c)
	})
	return r, started, err
}

// orphaned hands a definitive answer for a call that has ended to Orphan.
// A flagged call has not ended: its answer waits for an operator.
func (e *Effect[R, O]) orphaned(ctx context.Context, c *Call, r R, answer O) (bool, error) {
	if e.Orphan == nil || c.State == CallFlagged {
		return false, nil
	}
	orphan, err := e.Orphan(ctx, r, answer)
	if err == nil && orphan {
		e.k.reconciled(c.Kind, reconcileOrphan)
	}
	return orphan, err
}

// begin is phase 1: the call and resource the owner's recovery point
// names, or new ones. The call goes in first: its id is derived from the
// record's key and lifetime, so a record that made its call already (the
// point this owner resumed from was older than the call) finds it by the
// clash and resumes it, and never makes a second.
func (e *Effect[R, O]) begin(ctx context.Context, o *Op, secret []byte, create func(ctx context.Context, c Call) (R, error)) (*Call, R, error) {
	var (
		c *Call
		r R
	)
	err := e.k.inTx(ctx, func(ctx context.Context) error {
		var err error
		id := resourceOf(o.point)
		if id == "" {
			if c, err = e.k.newCall(ctx, o, e.Kind, e.Prefix, secret); err != nil {
				return err
			}
			switch err := e.k.store.InsertCall(ctx, c); {
			case errors.Is(err, ErrKeyExists):
				id = c.ID
				if err := o.checkpoint(ctx, pointOf(e.Kind+"_created", id)); err != nil {
					return err
				}
			case err != nil:
				return err
			default:
				if r, err = create(ctx, *c); err != nil {
					return err
				}
				return o.checkpoint(ctx, pointOf(e.Kind+"_created", c.ID))
			}
		}
		c, r, err = e.resume(ctx, o, id)
		return err
	})
	return c, r, err
}

// resume is phase 1 for an operation that has its resource: the call
// locked and the resource loaded, in the transaction ctx carries or one of
// its own, and the client's answer stored if the call has settled.
func (e *Effect[R, O]) resume(ctx context.Context, o *Op, id string) (c *Call, r R, err error) {
	r, err = e.locked(ctx, o.scope, id, func(ctx context.Context, locked *Call, r *R) error {
		if c = locked; !c.State.settled() {
			return nil
		}
		return e.finish(ctx, o, c, *r)
	})
	if err != nil {
		err = fmt.Errorf("resume %s %s: %w", e.Kind, id, err)
	}
	return c, r, err
}

// secret is the secret the owner's new call derives its id and key with:
// Config.KeySecret, unless a former secret (PreviousKeySecrets) derived a
// call of the same operation that the outside service holds (its rows were
// lost; the client retries after the secret changed). Asked before phase
// 1, outside any transaction, and only for an operation that has no call
// yet; Find is then given the zero resource and must ask by key alone. A
// lookup that fails is ErrNotExecuted: a new key while an old one may hold
// the operation's effect could make it twice.
func (e *Effect[R, O]) secret(ctx context.Context, o *Op) ([]byte, error) {
	former := e.k.cfg.PreviousKeySecrets
	if len(former) == 0 || resourceOf(o.point) != "" {
		return e.k.cfg.KeySecret, nil
	}
	n, err := e.k.store.CountCalls(ctx, o.scope, o.key, e.Kind, o.created)
	if err != nil {
		return nil, err
	}
	var zero R
	for _, secret := range former {
		id := deriveID(secret, e.Prefix, o.scope, o.key, e.Kind, n)
		switch _, err := e.Find(ctx, zero, id); {
		case err == nil:
			return secret, nil
		case !errors.Is(err, ErrNoSuchCall):
			return nil, fmt.Errorf("%w: ask the outside service under a former secret's key: %w", ErrNotExecuted, err)
		}
	}
	return e.k.cfg.KeySecret, nil
}

// intend is phase 2: the intent to call, under the owner's fence. A call
// that settled meanwhile (a webhook, the reconciler) is answered as it is.
func (e *Effect[R, O]) intend(ctx context.Context, o *Op, seen *Call) (c *Call, r R, err error) {
	r, err = e.locked(ctx, o.scope, seen.ID, func(ctx context.Context, locked *Call, r *R) (err error) {
		if c = locked; c.State.settled() {
			return e.finish(ctx, o, c, *r)
		}
		// The fence is checked first: an owner that lost its record must
		// not open an intent, nor call.
		if err := o.checkpoint(ctx, pointOf(e.Kind+"_calling", c.ID)); err != nil {
			return err
		}
		wasCalling := c.State == CallCalling
		if err := c.move(eventIntent, o.fence, e.k.now()); err != nil {
			return err
		}
		if wasCalling && e.Unknown != nil {
			// Another owner's intent was open: its call may still land.
			if *r, err = e.Unknown(ctx, *r); err != nil {
				return err
			}
		}
		e.k.schedule(c)
		if c.State == CallUnknown {
			// A call sent again: looked at once this sender's lock has
			// surely run out, not while it is at work.
			c.DueAt = c.AttemptedAt.Add(e.k.cfg.LockTimeout)
		}
		return e.k.store.SaveCall(ctx, c)
	})
	return c, r, err
}

// answered is phase 3 for a definitive answer. It returns the resource and,
// for the reconciler, how the call ended.
func (e *Effect[R, O]) answered(ctx context.Context, o *Op, id string, answer O) (R, string, error) {
	result := reconcileResolved
	r, err := e.locked(ctx, o.scope, id, func(ctx context.Context, c *Call, r *R) (err error) {
		if c.State.settled() {
			// Settled meanwhile (a webhook, the reconciler), or canceled
			// and asked about once more: an answer that reports an effect
			// the call ended without is an orphan.
			if c.State == CallCanceled {
				result = reconcileConfirmed
			}
			orphan, err := e.orphaned(ctx, c, *r, answer)
			if err != nil {
				return err
			}
			if orphan {
				result = "" // told by orphaned
			}
			return e.finish(ctx, o, c, *r)
		}
		if *r, err = e.settle(ctx, o, c, *r, answer); c.State == CallFlagged {
			result = "" // told by flagged
		}
		return err
	})
	return r, result, err
}

// locked runs fn in one transaction (the one ctx carries, or its own), with
// the call (scope, id) locked and its resource loaded: the opening of phase
// 3's three endings, of a webhook's news and of an operator's ruling. It
// returns the resource as fn leaves it.
func (e *Effect[R, O]) locked(ctx context.Context, scope, id string, fn func(ctx context.Context, c *Call, r *R) error) (R, error) {
	var r R
	err := e.k.inTx(ctx, func(ctx context.Context) error {
		c, err := e.k.store.LockCall(ctx, scope, id)
		if err != nil {
			return err
		}
		if r, err = e.Load(ctx, scope, id); err != nil {
			return err
		}
		return fn(ctx, c, &r)
	})
	return r, err
}

// notExecuted is phase 3 when the call did nothing: this owner's intent is
// closed under its fence, and the error is returned only if the call is
// ready again (no other owner's call can be in flight). Otherwise the
// outcome stays unknown, and the resource is answered as it stands.
func (e *Effect[R, O]) notExecuted(ctx context.Context, o *Op, id string, cause error) (R, error) {
	var ready bool
	r, err := e.locked(ctx, o.scope, id, func(ctx context.Context, c *Call, r *R) error {
		if c.State.settled() {
			return e.finish(ctx, o, c, *r)
		}
		if err := o.checkpoint(ctx, pointOf(e.Kind+"_created", id)); err != nil {
			return err
		}
		if c.move(eventNotExecuted, o.fence, e.k.now()) != nil {
			return nil
		}
		ready = c.State == CallReady
		e.k.schedule(c)
		return e.k.store.SaveCall(ctx, c)
	})
	if err == nil && ready {
		err = fmt.Errorf("%s %s: %w", e.Kind, id, cause)
	}
	return r, err
}

// unknown is phase 3 when the call's outcome is unknown: the call is
// recorded so, the resource told (Unknown), and the record stays open (a
// 202) until the reconciler, a webhook or a retry learns the outcome.
func (e *Effect[R, O]) unknown(ctx context.Context, o *Op, id string) (R, error) {
	return e.locked(ctx, o.scope, id, func(ctx context.Context, c *Call, r *R) error {
		if c.State.settled() {
			return e.finish(ctx, o, c, *r)
		}
		if err := e.markUnknown(ctx, c, r, eventUnknown); err != nil {
			return err
		}
		return o.checkpoint(ctx, pointOf(e.Kind+"_unknown", id))
	})
}

// markUnknown moves c by ev to unknown, tells the resource (Unknown) and
// saves c for the reconciler's next look, in the caller's transaction: a
// call whose outcome is unknown, or a flagged one an operator hands back.
func (e *Effect[R, O]) markUnknown(ctx context.Context, c *Call, r *R, ev callEvent) (err error) {
	if err := c.move(ev, 0, e.k.now()); err != nil {
		return err
	}
	if e.Unknown != nil {
		if *r, err = e.Unknown(ctx, *r); err != nil {
			return err
		}
	}
	e.k.schedule(c)
	return e.k.store.SaveCall(ctx, c)
}

// settle is the one place a definitive answer is applied, whoever learned it
// (a request, the reconciler, a webhook): the money check, then Settle and
// the call done, or, on a mismatch, nothing applied and the call flagged.
// The client's answer is stored by o (the request's owner, or a claim on
// its record), in the same transaction. It runs in the caller's
// transaction, with c locked.
func (e *Effect[R, O]) settle(ctx context.Context, o *Op, c *Call, r R, answer O) (R, error) {
	now := e.k.now()
	if err := e.Check(r, answer); err != nil {
		if !errors.Is(err, ErrMismatch) {
			return r, err
		}
		if err := c.move(eventMismatch, 0, now); err != nil {
			return r, err
		}
		e.k.flagged(ctx, c, err)
		return r, e.k.store.SaveCall(ctx, c)
	}
	r, err := e.Settle(ctx, r, answer)
	if err != nil {
		return r, err
	}
	if err := c.move(eventAnswered, 0, now); err != nil {
		return r, err
	}
	if !o.holds() && c.ClientKey != "" {
		// Whoever holds the client's record (a request still at work, or
		// one that is about to crash) may never store this answer: the
		// reconciler comes back once that lock has run out, and stores it
		// if the record is still open (settleDue, phase 1).
		c.DueAt = now.Add(e.k.cfg.LockTimeout)
	}
	if err := e.k.store.SaveCall(ctx, c); err != nil {
		return r, err
	}
	return r, e.finish(ctx, o, c, r)
}

// finish stores the client's answer for the settled resource r, through o:
// a retry resuming an operation that settled meanwhile, the request that
// settled it, or the reconciler's claim. Nothing is stored when o holds no
// record, nor for a flagged call: the record stays open until an operator
// rules.
func (e *Effect[R, O]) finish(ctx context.Context, o *Op, c *Call, r R) (err error) {
	if !o.holds() || c.State == CallFlagged {
		return nil
	}
	if o.taken != nil && e.k.cfg.Span != nil {
		// The answer of a request that may be long gone: its span links
		// back to that request.
		var end func(error)
		ctx, end = e.k.cfg.Span(ctx, "finish "+e.Kind+" record", c.TraceParent, e.Kind+".id", c.ID)
		defer func() { end(err) }()
	}
	return o.complete(ctx, e.Answer(r))
}

// cancel is the reconciler's ending of phase 3 for a ready call the outside
// service does not hold: once CancelAfter has passed without an attempt, the
// resource is ended (Cancel) and the client's answer stored through o, in
// one transaction that re-checks, under the row lock, that the call is
// still ready and due (a retry resuming it first wins). It returns the
// resource, and canceled or unresolved.
func (e *Effect[R, O]) cancel(ctx context.Context, o *Op, id string) (R, string, error) {
	result := reconcileUnresolved
	r, err := e.locked(ctx, o.scope, id, func(ctx context.Context, c *Call, r *R) (err error) {
		if !e.cancelDue(c) {
			return nil
		}
		if *r, err = e.Cancel(ctx, *r); err != nil {
			return err
		}
		now := e.k.now()
		if err := c.move(eventCancel, 0, now); err != nil {
			return err
		}
		if e.Orphan != nil {
			c.DueAt = now.Add(e.k.cfg.CancelAfter) // the late look
		}
		if err := e.k.store.SaveCall(ctx, c); err != nil {
			return err
		}
		result = reconcileCanceled
		e.k.cfg.Log.InfoContext(ctx, "reconciler: canceled an operation that never reached the outside service",
			"kind", e.Kind, "scope", c.Scope, "resource_id", c.ID, "attempted_at", c.AttemptedAt)
		return o.complete(ctx, e.Answer(*r))
	})
	return r, result, err
}

// cancelDue reports whether a ready call has gone without an attempt for
// CancelAfter, and may be canceled once the outside service has no call.
func (e *Effect[R, O]) cancelDue(c *Call) bool {
	cfg := e.k.cfg
	return e.Cancel != nil && cfg.CancelAfter > 0 && c.State == CallReady &&
		!c.AttemptedAt.After(e.k.now().Add(-cfg.CancelAfter))
}
