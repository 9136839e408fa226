package idempotency

import "time"

// CallMovesForTest is callMoves, by state and event name, for the diagram
// test (an external test: testkit imports the stores, which import this
// package).
func CallMovesForTest() map[string]map[string]string {
	out := map[string]map[string]string{}
	for from, events := range callMoves {
		out[string(from)] = map[string]string{}
		for ev, to := range events {
			out[string(from)][string(ev)] = string(to)
		}
	}
	return out
}

// StepsForTest names every step decide can take.
func StepsForTest() []string {
	var names []string
	for s := step(1); s.String() != "unknown"; s++ {
		names = append(names, s.String())
	}
	return names
}

// DecideForTest is decide, its step by name, for the record diagram's test.
func DecideForTest(rec *Record, fingerprint string, now time.Time, guarded bool) string {
	return decide(rec, fingerprint, now, guarded).String()
}

// String names a step, for the tests' messages and the diagrams.
func (s step) String() string {
	switch s {
	case stepExecute:
		return "execute"
	case stepReserve:
		return "reserve"
	case stepMismatch:
		return "mismatch"
	case stepReplay:
		return "replay"
	case stepWait:
		return "wait"
	case stepTakeOver:
		return "take over"
	case stepExpired:
		return "expired"
	}
	return "unknown"
}
