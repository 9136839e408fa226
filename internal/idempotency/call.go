package idempotency

import (
	"errors"
	"time"
)

// Call is the outside call of one resource (a payment, a refund), a row of
// outside_calls beside the application's own: the key the outside service
// gets, whether an owner may be calling it now (the intent), and what is
// known of the outcome.
type Call struct {
	// Scope and ID name the resource (a merchant, and pay_…).
	Scope, ID, Kind string
	// ClientKey is the Idempotency-Key the answer is stored under, and
	// RecordCreatedAt its record's CreatedAt (which lifetime of the key);
	// both empty for a call the system started itself.
	ClientKey       string
	RecordCreatedAt time.Time
	// Key is sent to the outside service on every attempt (derive.go);
	// KeyVersion names the scheme, KeyFingerprint the secret.
	Key            string
	KeyVersion     int
	KeyFingerprint string
	State          CallState
	// IntentFence is the fence of the owner whose intent is open (state
	// calling); IntentAt when it opened it.
	IntentFence int64
	IntentAt    time.Time
	// AttemptedAt is when a request last worked on it (made or resumed it).
	AttemptedAt time.Time
	// DueAt is when the reconciler next looks (zero once settled); Checks
	// counts its looks that settled nothing, for backoff.
	DueAt  time.Time
	Checks int
	// TraceParent is the trace context of the request that made the call.
	TraceParent string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// CallState is where an outside call is; see callMoves.
type CallState string

// The states of an outside call.
const (
	CallReady    CallState = "ready"    // nothing in flight: never sent, or "not executed"
	CallCalling  CallState = "calling"  // an owner's intent is open: it may be sending
	CallUnknown  CallState = "unknown"  // may have been executed; re-sent under its key until known
	CallDone     CallState = "done"     // executed; its answer applied
	CallCanceled CallState = "canceled" // never reached the outside service; abandoned
	CallFlagged  CallState = "flagged"  // the answer failed Check; nothing applied until an operator acts
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
	// Only an operator moves a flagged call (Effect.Rule).
	CallFlagged: {
		eventRetry:  CallUnknown,
		eventAccept: CallDone,
	},
}

// errNoMove: the call's state does not allow the event (it settled
// meanwhile, or another owner's intent is open).
var errNoMove = errors.New("the outside call cannot make this move")

// move applies ev to c for the owner holding fence (0 for none), at now:
// an owner's "not executed" closes only its own intent. It returns
// errNoMove when the table refuses.
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
