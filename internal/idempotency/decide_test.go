package idempotency

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDecide is the whole decision of the layer as a table: no Gin, no
// database, only a record, a fingerprint, a time and whether the route is
// Guarded.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	resp := &Answer{Status: 201, Final: true}
	executing := func(lockedUntil time.Time) *Record {
		return &Record{Fingerprint: "fp", State: StateExecuting, LockedUntil: lockedUntil}
	}
	completed := &Record{Fingerprint: "fp", State: StateCompleted, Answer: resp}
	other := &Record{Fingerprint: "other", State: StateCompleted, Answer: resp}

	cases := []struct {
		name    string
		rec     *Record
		fp      string
		guarded bool
		want    step
	}{
		{"no record, atomic", nil, "fp", false, stepExecute},
		{"no record, guarded", nil, "fp", true, stepReserve},
		{"another request, atomic", other, "fp", false, stepMismatch},
		{"another request, guarded", other, "fp", true, stepMismatch},
		{"another request, even while it runs", &Record{Fingerprint: "other", State: StateExecuting, LockedUntil: now.Add(time.Minute)}, "fp", true, stepMismatch},
		{"completed, atomic", completed, "fp", false, stepReplay},
		{"completed, guarded", completed, "fp", true, stepReplay},
		{"locked, guarded", executing(now.Add(time.Second)), "fp", true, stepWait},
		{"locked, atomic", executing(now.Add(time.Second)), "fp", false, stepWait},
		{"lock ran out, guarded", executing(now.Add(-time.Second)), "fp", true, stepTakeOver},
		{"lock runs out right now, guarded", executing(now), "fp", true, stepTakeOver},
		{"lock ran out, atomic never takes over", executing(now.Add(-time.Second)), "fp", false, stepWait},
		{"completed without a response waits", &Record{Fingerprint: "fp", State: StateCompleted, LockedUntil: now.Add(-time.Hour)}, "fp", true, stepWait},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want.String(), decide(tc.rec, tc.fp, now, tc.guarded).String())
		})
	}
}

func TestPointSpelling(t *testing.T) {
	require.Equal(t, "payment_created:pay_1", pointOf("payment_created", "pay_1"))
	require.Equal(t, "pay_1", resourceOf("payment_created:pay_1"))
	require.Equal(t, "pay_01J:odd", resourceOf(pointOf("payment_unknown", "pay_01J:odd")), "a resource may hold the separator")
	require.Empty(t, resourceOf(PointStarted), "nothing durable behind a fresh reservation")
}
