package idempotency

import (
	"errors"
	"time"
)

// Call is the outside call of one operation as the core keeps it: a row of
// outside_calls per resource (a payment, a refund, a fork's receipt), beside
// the application's own row. It says which key the outside service gets,
// whether an owner may be calling it right now (the intent), and what is
// known of the outcome. The application's row says what the outcome means.
type Call struct {
	// Scope and ID name the resource (a merchant, and pay_…); Kind is its
	// Effect's.
	Scope, ID, Kind string
	// ClientKey is the Idempotency-Key of the operation: the record the
	// answer is stored under. Empty for a call the system started itself.
	ClientKey string
	// RecordCreatedAt is the CreatedAt of the client's record the call was
	// made under: which lifetime of the key it belongs to (a key may be
	// used again once its record expired). Zero for a call the system
	// started itself.
	RecordCreatedAt time.Time
	// Key is sent to the outside service on every attempt, derived from the
	// client's operation (see derive.go); KeyVersion names the scheme, and
	// KeyFingerprint the secret that derived it (KeyFingerprint).
	Key            string
	KeyVersion     int
	KeyFingerprint string
	State          CallState
	// IntentFence is the fence of the owner whose intent is open (state
	// calling); IntentAt when it opened it.
	IntentFence int64
	IntentAt    time.Time
	// AttemptedAt is when a request last worked on the operation: its
	// creation, or a retry resuming it. A ready call is canceled only after
	// CancelAfter without one.
	AttemptedAt time.Time
	// DueAt is when the reconciler next looks at the call; zero when it is
	// settled. Checks counts its looks that settled nothing, for backoff.
	DueAt  time.Time
	Checks int
	// TraceParent is the W3C trace context of the request that made the
	// call: the reconciler's spans link back to it.
	TraceParent string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// CallState is where an outside call is; see callMoves.
type CallState string

// The states of an outside call.
const (
	// CallReady: no call is in flight. Nothing was sent, or every attempt
	// ended "not executed".
	CallReady CallState = "ready"
	// CallCalling: an owner recorded its intent and may be sending the call.
	CallCalling CallState = "calling"
	// CallUnknown: a call may have reached the outside service and its
	// outcome is not known. Re-sent under the same key until it executes.
	CallUnknown CallState = "unknown"
	// CallDone: the outside service executed the call; its answer applied.
	CallDone CallState = "done"
	// CallCanceled: it never reached the outside service and was abandoned.
	CallCanceled CallState = "canceled"
	// CallFlagged: the outside service's answer disagrees with ours (the
	// money check); nothing applied, out of the reconcile rounds until an
	// operator acts.
	CallFlagged CallState = "flagged"
)

// settled reports whether the call can no longer change (but by an
// operator, for a flagged one).
func (s CallState) settled() bool {
	return s == CallDone || s == CallCanceled || s == CallFlagged
}

// callEvent is what happens to a call.
type callEvent string

const (
	eventIntent      callEvent = "intent"       // an owner is about to send the call
	eventNotExecuted callEvent = "not executed" // the owner's call did nothing, written under its fence
	eventUnknown     callEvent = "unknown"      // the owner's call may have happened; or an intent's owner lost its fence
	eventAnswered    callEvent = "answered"     // the outside service's definitive answer, which passed the money check
	eventMismatch    callEvent = "mismatch"     // a definitive answer that failed the money check
	eventCancel      callEvent = "cancel"       // the reconciler: no call at the outside service, and due
	eventRetry       callEvent = "retry"        // an operator: ask the outside service again
	eventAccept      callEvent = "accept"       // an operator: apply the outside answer as it is
)

// callMoves is the state machine of an outside call, and the only place
// that says which move is allowed: every write of a call goes through move.
// docs/design/operation.md draws it; a test holds the drawing to this table.
var callMoves = map[CallState]map[callEvent]CallState{
	CallReady: {
		eventIntent:   CallCalling,
		eventAnswered: CallDone,
		eventMismatch: CallFlagged,
		eventCancel:   CallCanceled,
	},
	CallCalling: {
		eventNotExecuted: CallReady,
		eventUnknown:     CallUnknown,
		eventAnswered:    CallDone,
		eventMismatch:    CallFlagged,
	},
	CallUnknown: {
		// Intents after the first only record the attempt: a call whose
		// outcome is unknown stays so until the outside service executes it.
		eventIntent:      CallUnknown,
		eventNotExecuted: CallUnknown,
		eventUnknown:     CallUnknown,
		eventAnswered:    CallDone,
		eventMismatch:    CallFlagged,
	},
	// Only an operator moves a flagged call (Keeper.Unflag).
	CallFlagged: {
		eventRetry:  CallUnknown,
		eventAccept: CallDone,
	},
}

// errNoMove: the call's state does not allow the event (it settled
// meanwhile, or another owner's intent is open). The caller reads the call
// again and decides anew.
var errNoMove = errors.New("the outside call cannot make this move")

// move applies ev to c, for the owner holding fence (0 for none), at now. An
// owner's intent on a call another owner is calling makes the outcome
// unknown (that owner may still send); an owner's "not executed" closes only
// its own intent. It returns errNoMove when the table refuses.
func (c *Call) move(ev callEvent, fence int64, now time.Time) error {
	if ev == eventIntent && c.State == CallCalling {
		// Another owner's intent is open: it lost its fence (we hold the
		// record now), but its call may still go out.
		c.State = CallUnknown
	}
	if ev == eventNotExecuted && c.State == CallCalling && c.IntentFence != fence {
		return errNoMove
	}
	to, ok := callMoves[c.State][ev]
	if !ok {
		return errNoMove
	}
	c.State, c.UpdatedAt = to, now
	switch to {
	case CallCalling:
		c.IntentFence, c.IntentAt = fence, now
	case CallReady, CallUnknown:
		c.IntentFence = 0
	}
	if ev == eventIntent {
		c.AttemptedAt = now
	}
	if to.settled() {
		c.DueAt, c.IntentFence = time.Time{}, 0
	}
	return nil
}
