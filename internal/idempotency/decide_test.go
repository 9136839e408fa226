package idempotency_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
)

// TestDecide is the whole decision of the layer as a table: no Gin, no
// database, only a record, a fingerprint, a time and a mode.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	resp := &idempotency.Answer{Status: 201, Final: true}
	executing := func(lockedUntil time.Time) *idempotency.Record {
		return &idempotency.Record{Fingerprint: "fp", State: idempotency.StateExecuting, LockedUntil: lockedUntil}
	}
	completed := &idempotency.Record{Fingerprint: "fp", State: idempotency.StateCompleted, Answer: resp}
	other := &idempotency.Record{Fingerprint: "other", State: idempotency.StateCompleted, Answer: resp}

	cases := []struct {
		name string
		rec  *idempotency.Record
		fp   string
		mode idempotency.Mode
		want idempotency.Step
	}{
		{"no record, atomic", nil, "fp", idempotency.Atomic, idempotency.StepExecute},
		{"no record, guarded", nil, "fp", idempotency.Guarded, idempotency.StepReserve},
		{"another request, atomic", other, "fp", idempotency.Atomic, idempotency.StepMismatch},
		{"another request, guarded", other, "fp", idempotency.Guarded, idempotency.StepMismatch},
		{"another request, even while it runs", &idempotency.Record{Fingerprint: "other", State: idempotency.StateExecuting, LockedUntil: now.Add(time.Minute)}, "fp", idempotency.Guarded, idempotency.StepMismatch},
		{"completed, atomic", completed, "fp", idempotency.Atomic, idempotency.StepReplay},
		{"completed, guarded", completed, "fp", idempotency.Guarded, idempotency.StepReplay},
		{"locked, guarded", executing(now.Add(time.Second)), "fp", idempotency.Guarded, idempotency.StepWait},
		{"locked, atomic", executing(now.Add(time.Second)), "fp", idempotency.Atomic, idempotency.StepWait},
		{"lock ran out, guarded", executing(now.Add(-time.Second)), "fp", idempotency.Guarded, idempotency.StepTakeOver},
		{"lock runs out right now, guarded", executing(now), "fp", idempotency.Guarded, idempotency.StepTakeOver},
		{"lock ran out, atomic never takes over", executing(now.Add(-time.Second)), "fp", idempotency.Atomic, idempotency.StepWait},
		{"completed without a response waits", &idempotency.Record{Fingerprint: "fp", State: idempotency.StateCompleted, LockedUntil: now.Add(-time.Hour)}, "fp", idempotency.Guarded, idempotency.StepWait},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want.String(), idempotency.Decide(tc.rec, tc.fp, now, tc.mode).String())
		})
	}
}

func TestPointSpelling(t *testing.T) {
	for _, p := range []idempotency.Point{
		idempotency.PointStarted,
		{Step: "payment_created", Resource: "pay_1"},
		{Step: "payment_unknown", Resource: "pay_01J:odd"},
	} {
		require.Equal(t, p, idempotency.ParsePoint(p.String()), p.String())
	}
	require.Equal(t, "payment_created:pay_1", idempotency.Point{Step: "payment_created", Resource: "pay_1"}.String())
	require.True(t, idempotency.PointStarted.Started())
	require.False(t, idempotency.Point{Step: "payment_created", Resource: "pay_1"}.Started())
}
