package payments

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/testkit"
)

// TestStatusDiagram holds the picture of a payment's (and a refund's)
// status in docs/reference/states.md to canMove, the table every move's
// conditional update is built from: the same states, and an arrow for each
// move canMove allows between two different states, no other.
func TestStatusDiagram(t *testing.T) {
	d := testkit.StateDiagram(t, "docs/reference/states.md", "A payment or a refund")
	states := slices.Collect(maps.Keys(testkit.StringConsts(t, "internal/payments", "Status")))
	require.ElementsMatch(t, states, d.TopStates(), "the statuses: in the code, in the picture")

	var allowed, drawn []string
	for _, from := range states {
		for _, to := range states {
			if from != to && Status(from).canMove(Status(to)) {
				allowed = append(allowed, from+" --> "+to)
			}
		}
	}
	for _, tr := range d.Transitions {
		if tr.From != "[*]" && tr.To != "[*]" {
			drawn = append(drawn, tr.From+" --> "+tr.To)
		}
	}
	require.ElementsMatch(t, allowed, drawn, "the moves canMove allows, and the ones drawn")
}
