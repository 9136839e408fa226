package explore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/idemkeys/payments/internal/idempotency"
)

// Outside is the outside service the core calls (a payment provider): it
// executes each request once per key, as a real one honours idempotency
// keys, and keeps a ledger of what it executed: the truth the invariants
// hold our tables to. In a schedule, the explorer decides what becomes of
// each request:
//
//	""      it executes and answers
//	"lost"  it executes and the answer is lost (a timeout)
//	"late"  the caller times out while the request is still on its way;
//	        it arrives later, when the explorer moves it (an actor)
//	"down"  it answers 503 before any effect (ErrNotExecuted)
//	"wrong" it executes, and what it holds differs from what we asked
//	        (another amount): the money check's case
//
// and a lookup (Find) may be "down" too.
type Outside struct {
	// OnExecute, if set, hears every call the outside service executes
	// while a schedule runs (to send its webhook).
	OnExecute func(Op)

	sched *Sched

	mu       sync.Mutex
	ops      map[string]Op
	inFlight map[string]int
}

// Request is one call to the outside service.
type Request struct {
	// Kind is the call's kind ("charge", "refund"); Key its idempotency key.
	Kind, Key string
	// Ref names our resource (a payment's id); Target what a refund undoes
	// (the charge's key).
	Ref, Target string
	Amount      int64
	// Decline: the outside service refuses it (a declined card): a
	// definitive answer that moves no money.
	Decline bool
}

// Op is what the outside service executed for a key.
type Op struct {
	Request
	// OK: it moved the money (false: declined).
	OK bool
	// Seq orders the ledger.
	Seq int
	// Around: it was sent around the core (Send), not by an Effect.
	Around bool
}

// ErrTimeout is an answer that never came: the outcome is unknown.
var ErrTimeout = errors.New("outside service: no answer before the timeout")

// NewOutside returns an empty outside service.
func NewOutside() *Outside { return &Outside{ops: map[string]Op{}, inFlight: map[string]int{}} }

// Do sends req and returns what the outside service executed under its key,
// or ErrTimeout (unknown), or an error wrapping idempotency.ErrNotExecuted.
func (o *Outside) Do(ctx context.Context, req Request) (Op, error) {
	out, err := o.choose(ctx, "send "+req.Kind+" "+short(req.Key), "lost", "late", "down", "wrong")
	if err != nil {
		return Op{}, fmt.Errorf("%w: %w", idempotency.ErrNotExecuted, err)
	}
	switch out {
	case "lost":
		o.execute(req)
		return Op{}, ErrTimeout
	case "late":
		o.mu.Lock()
		o.inFlight[req.Key]++
		o.mu.Unlock()
		o.sched.Spawn("late "+req.Kind+" "+short(req.Key), func(context.Context) {
			o.execute(req)
			o.mu.Lock()
			o.inFlight[req.Key]--
			o.mu.Unlock()
		})
		return Op{}, ErrTimeout
	case "down":
		return Op{}, fmt.Errorf("outside service: 503: %w", idempotency.ErrNotExecuted)
	case "wrong":
		req.Amount++
	}
	op := o.execute(req)
	if _, err := o.choose(ctx, "answer "+req.Kind+" "+short(req.Key)); err != nil {
		return Op{}, err
	}
	return op, nil
}

// Find returns what the outside service executed under key. It returns
// idempotency.ErrNoSuchCall, or an error when it could not be asked.
func (o *Outside) Find(ctx context.Context, key string) (Op, error) {
	out, err := o.choose(ctx, "find "+short(key), "down")
	if err != nil {
		return Op{}, err
	}
	if out == "down" {
		return Op{}, errors.New("outside service: 503 on a lookup")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	op, ok := o.ops[key]
	if !ok {
		return Op{}, idempotency.ErrNoSuchCall
	}
	return op, nil
}

// Send is a request sent around the core (an instance of a version before
// fencing, or by hand at the service's dashboard): it executes at once.
func (o *Outside) Send(req Request) Op {
	op := o.execute(req)
	o.mu.Lock()
	defer o.mu.Unlock()
	op.Around = true
	o.ops[req.Key] = op
	return op
}

func (o *Outside) choose(ctx context.Context, label string, faults ...string) (string, error) {
	if o.sched == nil {
		return "", nil
	}
	return o.sched.Choose(ctx, label, faults...)
}

func (o *Outside) execute(req Request) Op {
	o.mu.Lock()
	if op, ok := o.ops[req.Key]; ok {
		o.mu.Unlock()
		return op
	}
	op := Op{Request: req, OK: !req.Decline, Seq: len(o.ops) + 1}
	o.ops[req.Key] = op
	o.mu.Unlock()
	if o.OnExecute != nil && o.sched != nil {
		o.OnExecute(op)
	}
	return op
}

// Ledger returns what the outside service executed, in order.
func (o *Outside) Ledger() []Op {
	o.mu.Lock()
	defer o.mu.Unlock()
	ops := slices.Collect(maps.Values(o.ops))
	slices.SortFunc(ops, func(a, b Op) int { return cmp.Compare(a.Seq, b.Seq) })
	return ops
}

// Executed reports whether a request under key has executed, or is on its
// way and may still.
func (o *Outside) Executed(key string) (executed, onItsWay bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, executed = o.ops[key]
	return executed, o.inFlight[key] > 0
}

// short is the end of a key or id, enough to tell them apart in a trace.
func short(id string) string {
	if len(id) <= 8 {
		return id
	}
	return "…" + id[len(id)-6:]
}
