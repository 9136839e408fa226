package idempotency

import "time"

// Mode is how a route runs its keyed requests.
type Mode int

const (
	// Atomic is for operations whose whole effect is rows in the database:
	// the handler runs inside a transaction that the record commits with.
	Atomic Mode = iota + 1
	// Guarded is for operations with an effect outside the database: the
	// key is reserved first, the handler records recovery points with a
	// Lease, and the final answer is stored at the end.
	Guarded
)

func (m Mode) String() string {
	switch m {
	case Atomic:
		return "atomic"
	case Guarded:
		return "guarded"
	}
	return "unknown"
}

// Step is what a request does next about its key.
type Step int

// The steps Decide chooses among.
const (
	// StepExecute runs an Atomic request's handler in a transaction that
	// inserts the record with the answer.
	StepExecute Step = iota + 1
	// StepReserve inserts a Guarded request's executing record, then runs
	// the handler as its owner.
	StepReserve
	// StepMismatch refuses the request: the key holds another request.
	StepMismatch
	// StepReplay answers from the stored response.
	StepReplay
	// StepWait waits for the record's owner, then reads the record again.
	StepWait
	// StepTakeOver takes an abandoned record over (the fence grows) and
	// resumes its operation from the recovery point.
	StepTakeOver
	// StepExpired refuses the request: tombstones are on and the key's
	// record expired; nothing executes.
	StepExpired
)

func (s Step) String() string {
	switch s {
	case StepExecute:
		return "execute"
	case StepReserve:
		return "reserve"
	case StepMismatch:
		return "mismatch"
	case StepReplay:
		return "replay"
	case StepWait:
		return "wait"
	case StepTakeOver:
		return "take over"
	case StepExpired:
		return "expired"
	}
	return "unknown"
}

// Decide is the whole decision of the idempotency layer: given the live
// record under the request's key (nil when there is none, or none was read
// yet: an insert-if-absent then decides), the request's fingerprint, the
// time and the route's mode, it says what to do next. It reads nothing and
// writes nothing; Handle carries its step out and asks again.
func Decide(rec *Record, fingerprint string, now time.Time, mode Mode) Step {
	switch {
	case rec == nil && mode == Atomic:
		return StepExecute
	case rec == nil:
		return StepReserve
	case rec.Fingerprint != fingerprint:
		return StepMismatch
	case rec.State == StateExpired:
		return StepExpired
	case rec.State == StateCompleted && rec.Answer != nil:
		return StepReplay
	case rec.State == StateExecuting && mode == Guarded && !rec.LockedUntil.After(now):
		return StepTakeOver
	default:
		// Executing under a running lock: its owner is at work. (An Atomic
		// request never sees its own record executing: Atomic records are
		// inserted completed.)
		return StepWait
	}
}
