package idempotency

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
