package locallimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/gormstore/gormtest"
	"github.com/idemkeys/payments/internal/idempotency/locallimit"
)

// TestGateBoundsNewKeys: within the quota the gate lets a new key through;
// past it, it refuses with ErrRateLimited and when to try again, unless
// the key has a live record, which it returns to be decided on; and
// another scope has its own quota.
func TestGateBoundsNewKeys(t *testing.T) {
	for _, dialect := range gormtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			ctx := t.Context()
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			store := gormstore.New(gormtest.Open(t, dialect))
			gate := locallimit.Gate(store, locallimit.New(1, time.Minute, func() time.Time { return now }))

			rec, err := gate(ctx, "m1", "a", now)
			require.NoError(t, err)
			require.Nil(t, rec, "within the quota: go on")

			_, err = gate(ctx, "m1", "b", now)
			require.ErrorIs(t, err, idempotency.ErrRateLimited)
			require.Equal(t, time.Minute, idempotency.RetryAfter(err), "until the window turns")

			require.NoError(t, store.Insert(ctx, &idempotency.Record{Scope: "m1", Key: "c", Method: "POST", Path: "/x",
				Fingerprint: "fp", State: idempotency.StateExecuting, Point: idempotency.PointStarted,
				LockedUntil: now.Add(time.Minute), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}))
			rec, err = gate(ctx, "m1", "c", now)
			require.NoError(t, err, "past the quota, a key with a record is not refused")
			require.Equal(t, "fp", rec.Fingerprint, "its record is decided on")

			rec, err = gate(ctx, "m2", "b", now)
			require.NoError(t, err, "the quota is per scope")
			require.Nil(t, rec)
		})
	}
}
