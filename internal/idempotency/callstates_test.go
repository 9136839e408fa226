package idempotency_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestCallDiagram holds the picture of an outside call in
// docs/reference/states.md to callMoves: the same states, and an arrow,
// labelled with its event, for each move between two different states.
func TestCallDiagram(t *testing.T) {
	d := testkit.StateDiagram(t, "docs/reference/states.md", "An outside call")
	var states []string
	for name := range testkit.StringConsts(t, "internal/idempotency", "CallState") {
		states = append(states, name)
	}
	if !sameElements(states, d.TopStates()) {
		t.Fatalf("the states: in the code %v, in the picture %v", states, d.TopStates())
	}
	var moves, drawn []string
	for from, events := range idempotency.CallMovesForTest() {
		for ev, to := range events {
			if from != to {
				moves = append(moves, from+" --> "+to+" : "+ev)
			}
		}
	}
	for _, tr := range d.Transitions {
		if tr.From != "[*]" {
			drawn = append(drawn, tr.From+" --> "+tr.To+" : "+strings.Join(tr.Names, ", "))
		}
	}
	if !sameElements(moves, drawn) {
		slices.Sort(moves)
		slices.Sort(drawn)
		t.Fatalf("the moves of callMoves:\n%v\nand the ones drawn:\n%v", moves, drawn)
	}
}

func sameElements(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
