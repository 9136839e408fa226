package idempotency

import (
	"context"
	"errors"
	"fmt"
)

// Effect is one kind of operation whose effect is outside the database (a
// charge, a refund, a fork's mailed receipt): R is the application's
// resource, O the outside service's definitive answer. Run drives it in
// three phases (doc.go), and the fields say what each does to the
// application's rows:
//
//	phase 1  create or resume   create (Run's argument), or Load
//	phase 2  intent, the call   the core, then Send under the call's key
//	phase 3  settle             Check, then Settle; or Unknown
//
// Every field but Unknown, Cancel and Orphan is required.
type Effect[R, O any] struct {
	// Kind names the kind: the purpose of its derived keys, the step of
	// its recovery points ("payment" → "payment_created:pay_…").
	Kind string
	// Prefix starts the ids of its resources ("pay_").
	Prefix string
	// Load reads the resource, in the transaction ctx carries, if any.
	Load func(ctx context.Context, scope, id string) (R, error)
	// Send makes the outside call under key. A nil error is a definitive
	// answer; one wrapping ErrNotExecuted, nothing done; any other, an
	// unknown outcome.
	Send func(ctx context.Context, r R, key string) (O, error)
	// Find asks the outside service about the call under key:
	// ErrNoSuchCall when it has none, other errors as Send's.
	Find func(ctx context.Context, r R, key string) (O, error)
	// Check returns ErrMismatch (wrapped) when the answer is not what we
	// asked for (amount, currency, resource): then nothing is applied and
	// the call is flagged.
	Check func(r R, o O) error
	// Settle applies an answer that passed Check.
	Settle func(ctx context.Context, r R, o O) (R, error)
	// Unknown, if set, marks the resource as waiting for an unknown
	// outcome (a payment shows processing).
	Unknown func(ctx context.Context, r R) (R, error)
	// Cancel, if set, ends a resource whose call never reached the outside
	// service once Config.CancelAfter has passed; without it, such a
	// resource waits for its client's retry.
	Cancel func(ctx context.Context, r R) (R, error)
	// Answer is the client's answer for the resource as it stands: what a
	// request sends, and what is stored when the outcome settles later.
	Answer func(r R) Answer
	// Orphan, if set, hears a definitive answer for a call that has ended
	// (done or canceled), from a webhook, a late answer or the reconciler's
	// late look at a canceled call. It reports whether the answer is an
	// effect nobody asked for (a charge of a declined payment) and, if so,
	// undoes it (another Effect's Start) or flags it, under the call's row
	// lock: told twice, it acts once.
	Orphan func(ctx context.Context, r R, o O) (bool, error)

	k *Keeper
}

// Errors of an outside call, for an Effect's functions to return.
var (
	// ErrNotExecuted: the outside service did nothing (refused before any
	// effect, 503, never reached): trying again under the key is safe.
	ErrNotExecuted = errors.New("the outside call was not executed")
	// ErrNoSuchCall: the outside service has no call under the key.
	ErrNoSuchCall = errors.New("the outside service has no call under this key")
	// ErrMismatch: the outside service's answer is not what we asked for.
	ErrMismatch = errors.New("the outside service's answer differs from ours")
)

// errNoOwner: Effect.Run was given no Op, which only a Guarded request's
// handler gets: a wiring mistake, not one of the API's errors.
var errNoOwner = errors.New("idempotency: no operation owns a record; is the route Guarded?")

// Register binds e to k, once, at start: k's reconciler settles its calls,
// and k stores their answers whoever learns the outcome.
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

// Run runs op, the operation Keeper.Guarded hands its handler, as the
// owner of its record:
//
//   - phase 1, one transaction: resume the resource the recovery point
//     names, or make it: create gets the call's id and key, derived from
//     the request's key (derive.go);
//   - phase 2, one transaction: the intent to call, under the owner's
//     fence (an owner that lost its record calls nothing);
//   - the call, outside any transaction, under the call's key;
//   - phase 3, one transaction: a definitive answer is checked and settled
//     and the client's answer stored with it; "not executed" closes the
//     intent; an unknown outcome is recorded.
//
// It returns the resource as it stands, settled or not (after the call, a
// phase 3 that fails leaves it unknown), or: an error wrapping
// ErrNotExecuted when nothing can have happened (the same key resumes it);
// ErrFenced when another owner took the record over; before the call,
// create's and the store's errors.
func (e *Effect[R, O]) Run(ctx context.Context, op *Op, create func(ctx context.Context, c Call) (R, error)) (R, error) {
	var zero R
	if op == nil {
		return zero, errNoOwner
	}
	// A client that hangs up must not make the outcome unknown.
	ctx = context.WithoutCancel(ctx)

	secret, n, err := e.secret(ctx, op)
	if err != nil {
		return zero, err
	}
	c, r, err := e.begin(ctx, op, secret, n, create)
	if err != nil || c.State.settled() {
		return r, err
	}
	r, _, err = e.drive(ctx, op, c, r)
	return r, err
}

// drive runs phases 2 and 3 of call c for o, a request's owner or the
// reconciler's claim. Outside a request the outside service is asked first:
// what it holds settles the call; a call it does not hold is sent again
// only when its outcome is unknown (a ready one is its client's to send, or
// canceled after CancelAfter). It returns the resource and, for the
// reconciler, how the call ended (reconcile*; empty when already told).
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
		// The call went out and phase 3 could not commit (the database
		// away, a row held past the lock timeout): the intent stays open
		// for the reconciler, and the client is told the truth, an outcome
		// not known yet (the resource as phase 2 left it).
		e.k.cfg.Log.WarnContext(ctx, "idempotency: the outside call's outcome could not be recorded; the reconciler settles it",
			"kind", e.Kind, "resource_id", c.ID, "error", err)
		return r, reconcileError, nil
	}
	return settled, result, err
}

// Apply applies news of the call of resource (scope, id) that came outside
// any request (a confirmed webhook): checked and settled as a request
// would, the client's answer stored, in the transaction ctx carries if any.
// What became of the news:
//
//	"applied"  the answer settled the call
//	"repeat"   the call had ended already; nothing changed
//	"flagged"  the answer failed Check: nothing applied, the call flagged
//	"orphan"   the call had ended without this effect: Orphan handled it
//
// It returns ErrNotFound when the resource has no call, or the store's,
// Settle's and Orphan's errors.
func (e *Effect[R, O]) Apply(ctx context.Context, scope, id string, answer O) (r R, outcome string, err error) {
	r, err = e.locked(ctx, scope, id, func(ctx context.Context, c *Call, r *R) (err error) {
		if c.State.settled() {
			outcome = "repeat"
			orphan, err := e.orphaned(ctx, c, *r, answer)
			if orphan {
				outcome = "orphan"
			}
			return err
		}
		o, _ := e.k.claimFor(ctx, c) // unclaimed: a running request stores the answer, or nobody can
		if *r, err = e.settle(ctx, o, c, *r, answer, eventAnswered); err != nil {
			return err
		}
		outcome = "applied"
		if c.State == CallFlagged {
			// Nothing answered for good: the record goes back, open.
			outcome = "flagged"
			return o.release(ctx)
		}
		return nil
	})
	return r, outcome, err
}

// Start begins an operation the system starts itself, without a client
// (the refund of an orphan charge), with its id and key derived from scope
// and seed: started twice, it is found the second time (started false).
// create writes the resource in the transaction ctx carries, or one of its
// own; the call starts unknown, for the reconciler to send, and send again
// under the same key, until the outside service executes it.
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
		c := e.k.call(ctx, scope, id, e.Kind, e.k.cfg.KeySecret, CallUnknown)
		if r, err = create(ctx, *c); err != nil {
			return err
		}
		return e.k.store.InsertCall(ctx, c)
	})
	return r, started, err
}

// orphaned hands an answer for a call that has ended to Orphan (a flagged
// one has not: it waits for an operator).
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

// Rule ends an operator's review of the flagged call (scope, id). With no
// ruling (api flagged retry) the call goes back to unknown, and the
// reconciler's next round asks the outside service again and checks its
// answer anew. With a ruling, a definitive answer the operator vouches for
// (api flagged accept or fail), it is applied without Check (Settle), the
// call done and the client's answer stored, in one transaction; what the
// outside service holds may then be an effect the ruling says never
// happened: give it to Apply, which hands it to Orphan. It returns the
// resource as ruled, or ErrNotFound, an error when the call is not
// flagged, or Settle's and the store's errors.
func (e *Effect[R, O]) Rule(ctx context.Context, scope, id string, ruling *O) (R, error) {
	return e.locked(ctx, scope, id, func(ctx context.Context, c *Call, r *R) (err error) {
		switch {
		case c.State != CallFlagged:
			return fmt.Errorf("%s %s is %s: the outside call is not flagged", e.Kind, c.ID, c.State)
		case ruling == nil:
			return e.markUnknown(ctx, c, r, eventRetry)
		}
		o, _ := e.k.claimFor(ctx, c) // unclaimed: nobody's answer to store, or a request stores it
		*r, err = e.settle(ctx, o, c, *r, *ruling, eventAccept)
		return err
	})
}

// begin is phase 1: the call and resource the recovery point names, or new
// ones. The call goes in first: its id is derived from the record, so an
// owner whose point is older than a call already made finds it by the
// clash, and resumes it.
func (e *Effect[R, O]) begin(ctx context.Context, o *Op, secret []byte, n int, create func(ctx context.Context, c Call) (R, error)) (*Call, R, error) {
	var (
		c *Call
		r R
	)
	err := e.k.inTx(ctx, func(ctx context.Context) error {
		var err error
		id := resourceOf(o.point)
		if id == "" {
			c = e.k.newCall(ctx, o, e.Kind, e.Prefix, secret, n)
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
// locked, the resource loaded, and the answer stored if it has settled.
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

// secret is what a new call derives its id and key with, and n, the calls
// of this kind under the client's key's earlier records (nothing for an
// operation that has its resource): Config.KeySecret, unless the outside
// service holds a call of this operation under a former secret's key
// (PreviousKeySecrets; our rows were lost, the secret changed since). Find
// is given the zero resource and asks by key alone. A lookup that fails is
// ErrNotExecuted: a new key could make the effect twice.
func (e *Effect[R, O]) secret(ctx context.Context, o *Op) (secret []byte, n int, err error) {
	if resourceOf(o.point) != "" {
		return nil, 0, nil
	}
	if n, err = e.k.store.CountCalls(ctx, o.scope, o.key, e.Kind, o.created); err != nil {
		return nil, 0, err
	}
	var zero R
	for _, secret := range e.k.cfg.PreviousKeySecrets {
		switch _, err := e.Find(ctx, zero, deriveID(secret, e.Prefix, o.scope, o.key, e.Kind, n)); {
		case err == nil:
			return secret, n, nil
		case !errors.Is(err, ErrNoSuchCall):
			return nil, 0, fmt.Errorf("%w: ask the outside service under a former secret's key: %w", ErrNotExecuted, err)
		}
	}
	return e.k.cfg.KeySecret, n, nil
}

// intend is phase 2: the intent to call, under the owner's fence; a call
// settled meanwhile is answered as it is.
func (e *Effect[R, O]) intend(ctx context.Context, o *Op, seen *Call) (c *Call, r R, err error) {
	r, err = e.locked(ctx, o.scope, seen.ID, func(ctx context.Context, locked *Call, r *R) (err error) {
		if c = locked; c.State.settled() {
			return e.finish(ctx, o, c, *r)
		}
		// The fence first: an owner that lost its record must not call.
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
			// Sent again: looked at once this sender's lock has run out.
			c.DueAt = c.AttemptedAt.Add(e.k.cfg.LockTimeout)
		}
		return e.k.store.SaveCall(ctx, c)
	})
	return c, r, err
}

// answered is phase 3 for a definitive answer.
func (e *Effect[R, O]) answered(ctx context.Context, o *Op, id string, answer O) (R, string, error) {
	result := reconcileResolved
	r, err := e.locked(ctx, o.scope, id, func(ctx context.Context, c *Call, r *R) (err error) {
		if c.State.settled() {
			// Settled meanwhile, or a canceled call's late look: an effect
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
		if *r, err = e.settle(ctx, o, c, *r, answer, eventAnswered); c.State == CallFlagged {
			result = "" // told by flagged
		}
		return err
	})
	return r, result, err
}

// locked runs fn in one transaction (ctx's, or its own) with the call
// (scope, id) locked and its resource loaded, and returns the resource as
// fn leaves it: how every phase, webhook and ruling opens.
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

// notExecuted is phase 3 when the call did nothing: the owner's intent is
// closed under its fence, and cause returned if the call is ready again (no
// other owner's call in flight); otherwise the outcome stays unknown.
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

// unknown is phase 3 for an unknown outcome: the record stays open (a 202)
// until the reconciler, a webhook or a retry learns it.
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
// saves c for the reconciler, in the caller's transaction.
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

// settle is the one place a definitive answer is applied, whoever learned
// it (ev eventAnswered) or ruled it (eventAccept, without Check): Check,
// then Settle and the call done, the answer stored through o in the same
// transaction; or, on a mismatch, nothing applied and the call flagged. c
// is locked in the caller's transaction.
func (e *Effect[R, O]) settle(ctx context.Context, o *Op, c *Call, r R, answer O, ev callEvent) (R, error) {
	now := e.k.now()
	var mismatch error
	if ev == eventAnswered {
		mismatch = e.Check(r, answer)
	}
	if mismatch != nil {
		if !errors.Is(mismatch, ErrMismatch) {
			return r, mismatch
		}
		if err := c.move(eventMismatch, 0, now); err != nil {
			return r, err
		}
		e.k.flagged(ctx, c, mismatch)
		return r, e.k.store.SaveCall(ctx, c)
	}
	r, err := e.Settle(ctx, r, answer)
	if err != nil {
		return r, err
	}
	if err := c.move(ev, 0, now); err != nil {
		return r, err
	}
	if !o.holds() && c.ClientKey != "" {
		// Whoever holds the record may crash before storing this answer:
		// the reconciler stores it once that lock has run out, if the
		// record is still open.
		c.DueAt = now.Add(e.k.cfg.LockTimeout)
	}
	if err := e.k.store.SaveCall(ctx, c); err != nil {
		return r, err
	}
	return r, e.finish(ctx, o, c, r)
}

// finish stores the client's answer for the settled resource r through o,
// unless o holds no record or c is flagged (open until an operator rules).
func (e *Effect[R, O]) finish(ctx context.Context, o *Op, c *Call, r R) (err error) {
	if !o.holds() || c.State == CallFlagged {
		return nil
	}
	if o.taken != nil && e.k.cfg.Span != nil {
		// A request that may be long gone: its span links back to it.
		var end func(error)
		ctx, end = e.k.cfg.Span(ctx, "finish "+e.Kind+" record", c.TraceParent, e.Kind+".id", c.ID)
		defer func() { end(err) }()
	}
	return o.complete(ctx, e.Answer(r))
}

// cancel is the reconciler's ending of phase 3 for a ready call the outside
// service does not hold: the resource ended (Cancel) and the answer stored
// through o, if the call is still ready and due under the row lock (a
// retry resuming it first wins).
func (e *Effect[R, O]) cancel(ctx context.Context, o *Op, id string) (R, string, error) {
	result := reconcileUnresolved
	r, err := e.locked(ctx, o.scope, id, func(ctx context.Context, c *Call, r *R) (err error) {
		now, cfg := e.k.now(), e.k.cfg
		if e.Cancel == nil || cfg.CancelAfter <= 0 || c.State != CallReady || c.AttemptedAt.After(now.Add(-cfg.CancelAfter)) {
			return nil // not ready, or attempted within CancelAfter: not canceled yet
		}
		if *r, err = e.Cancel(ctx, *r); err != nil {
			return err
		}
		if err := c.move(eventCancel, 0, now); err != nil {
			return err
		}
		if e.Orphan != nil {
			c.DueAt = now.Add(cfg.CancelAfter) // the late look
		}
		if err := e.k.store.SaveCall(ctx, c); err != nil {
			return err
		}
		result = reconcileCanceled
		cfg.Log.InfoContext(ctx, "reconciler: canceled an operation that never reached the outside service",
			"kind", e.Kind, "scope", c.Scope, "resource_id", c.ID, "attempted_at", c.AttemptedAt)
		return o.complete(ctx, e.Answer(*r))
	})
	return r, result, err
}
