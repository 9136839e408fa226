package idempotency

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDecide is the whole decision of the layer as a table: no Gin, no
// database, only a record, a fingerprint, a time and a mode.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	resp := &Answer{Status: 201, Final: true}
	executing := func(lockedUntil time.Time) *Record {
		return &Record{Fingerprint: "fp", State: StateExecuting, LockedUntil: lockedUntil}
	}
	completed := &Record{Fingerprint: "fp", State: StateCompleted, Answer: resp}
	other := &Record{Fingerprint: "other", State: StateCompleted, Answer: resp}

	cases := []struct {
		name string
		rec  *Record
		fp   string
		mode Mode
		want step
	}{
		{"no record, atomic", nil, "fp", Atomic, stepExecute},
		{"no record, guarded", nil, "fp", Guarded, stepReserve},
		{"another request, atomic", other, "fp", Atomic, stepMismatch},
		{"another request, guarded", other, "fp", Guarded, stepMismatch},
		{"another request, even while it runs", &Record{Fingerprint: "other", State: StateExecuting, LockedUntil: now.Add(time.Minute)}, "fp", Guarded, stepMismatch},
		{"completed, atomic", completed, "fp", Atomic, stepReplay},
		{"completed, guarded", completed, "fp", Guarded, stepReplay},
		{"locked, guarded", executing(now.Add(time.Second)), "fp", Guarded, stepWait},
		{"locked, atomic", executing(now.Add(time.Second)), "fp", Atomic, stepWait},
		{"lock ran out, guarded", executing(now.Add(-time.Second)), "fp", Guarded, stepTakeOver},
		{"lock runs out right now, guarded", executing(now), "fp", Guarded, stepTakeOver},
		{"lock ran out, atomic never takes over", executing(now.Add(-time.Second)), "fp", Atomic, stepWait},
		{"completed without a response waits", &Record{Fingerprint: "fp", State: StateCompleted, LockedUntil: now.Add(-time.Hour)}, "fp", Guarded, stepWait},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want.String(), decide(tc.rec, tc.fp, now, tc.mode).String())
		})
	}
}

func TestPointSpelling(t *testing.T) {
	require.Equal(t, "payment_created:pay_1", pointOf("payment_created", "pay_1"))
	require.Equal(t, "pay_1", resourceOf("payment_created:pay_1"))
	require.Equal(t, "pay_01J:odd", resourceOf(pointOf("payment_unknown", "pay_01J:odd")), "a resource may hold the separator")
	require.Empty(t, resourceOf(PointStarted), "nothing durable behind a fresh reservation")
}
