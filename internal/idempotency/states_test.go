package idempotency_test

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestRecordDiagram holds the picture of a key's record in
// docs/reference/states.md to the code. Its states are the State constants.
// An arrow's lower-case names are decide's steps, and they are exactly the
// steps decide takes from the arrow's state, for either mode, a lock that
// runs or has run out, the same request or another; its other names are
// Store methods (the janitor's purges too) or Record fields, the writes and
// times that move a record.
func TestRecordDiagram(t *testing.T) {
	d := testkit.StateDiagram(t, "docs/reference/states.md", "A key's record")
	states := slices.Collect(maps.Keys(testkit.StringConsts(t, "internal/idempotency", "State")))
	require.ElementsMatch(t, states, d.TopStates(), "the record's states: in the code, in the picture")

	steps := map[string]bool{}
	for _, s := range idempotency.StepsForTest() {
		steps[s] = true
	}
	movers := map[string]bool{}
	for _, typ := range []reflect.Type{reflect.TypeFor[idempotency.Store](), reflect.TypeFor[purger](), reflect.TypeFor[idempotency.Record]()} {
		for i := range typ.NumMethod() {
			movers[typ.Method(i).Name] = true
		}
		if typ.Kind() == reflect.Struct {
			for i := range typ.NumField() {
				movers[typ.Field(i).Name] = true
			}
		}
	}

	drawn := map[string][]string{}
	for _, tr := range d.Transitions {
		for _, name := range tr.Names {
			switch {
			case steps[name]:
				drawn[tr.From] = append(drawn[tr.From], name)
			case !movers[name]:
				t.Errorf("states.md:%d: %q is neither a step of decide nor a Store method or Record field", tr.Line, name)
			}
		}
	}

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	decided := map[string][]string{}
	decide := func(from string, rec *idempotency.Record, fingerprint string, guarded bool) {
		if step := idempotency.DecideForTest(rec, fingerprint, now, guarded); !slices.Contains(decided[from], step) {
			decided[from] = append(decided[from], step)
		}
	}
	for _, guarded := range []bool{false, true} {
		decide("[*]", nil, "f", guarded)
		for _, state := range states {
			for _, lockedUntil := range []time.Time{now.Add(time.Second), now.Add(-time.Second)} {
				for _, fingerprint := range []string{"f", "another request"} {
					rec := &idempotency.Record{State: idempotency.State(state), Fingerprint: "f", LockedUntil: lockedUntil}
					if rec.State == idempotency.StateCompleted { // a completed record holds its answer
						rec.Answer = &idempotency.Answer{Status: 201, Final: true}
					}
					decide(state, rec, fingerprint, guarded)
				}
			}
		}
	}
	for _, from := range append(states, "[*]") {
		require.ElementsMatch(t, decided[from], drawn[from], "the steps decide takes from %s, and the ones drawn", from)
	}
}

// purger is janitor.Store, which the core's tests may not import: the
// purges that end a record, left out of the core's Store port.
type purger interface {
	PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error)
	PurgeTombstones(ctx context.Context, now time.Time, limit int) (int, error)
}
