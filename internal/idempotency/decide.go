package idempotency

import "time"

// step is what a request does next about its key.
type step int

// The steps decide chooses among.
const (
	// stepExecute runs an Atomic request's handler in a transaction that
	// inserts the record with the answer.
	stepExecute step = iota + 1
	// stepReserve inserts a Guarded request's executing record, then runs
	// the handler as its owner.
	stepReserve
	// stepMismatch refuses the request: the key holds another request.
	stepMismatch
	// stepReplay answers from the stored response.
	stepReplay
	// stepWait waits for the record's owner, then reads the record again.
	stepWait
	// stepTakeOver takes an abandoned record over (the fence grows) and
	// resumes its operation from the recovery point.
	stepTakeOver
	// stepExpired refuses the request: tombstones are on and the key's
	// record expired; nothing executes.
	stepExpired
)

// decide is the whole decision of the idempotency layer: given the live
// record under the request's key (nil when there is none, or none was read
// yet), the request's fingerprint, the time and whether the route is
// Guarded, it says what to do next. It reads and writes nothing; the
// request's loop carries its step out and asks again. TestDecide is its
// table.
func decide(rec *Record, fingerprint string, now time.Time, guarded bool) step {
	switch {
	case rec == nil && !guarded:
		return stepExecute
	case rec == nil:
		return stepReserve
	case rec.Fingerprint != fingerprint:
		return stepMismatch
	case rec.State == StateExpired:
		return stepExpired
	case rec.State == StateCompleted && rec.Answer != nil:
		return stepReplay
	case rec.State == StateExecuting && guarded && !rec.LockedUntil.After(now):
		return stepTakeOver
	default:
		// Executing under a running lock: its owner is at work.
		return stepWait
	}
}
