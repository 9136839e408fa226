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

// TestStoreBoundsNewKeys: past the quota, an insert is refused with
// ErrRateLimited and when to try again, and writes nothing; a key that has
// a record is never refused (the insert finds it, ErrKeyExists), and
// another scope has its own quota.
func TestStoreBoundsNewKeys(t *testing.T) {
	for _, dialect := range gormtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			ctx := t.Context()
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			inner := gormstore.New(gormtest.Open(t, dialect))
			store := locallimit.NewStore(inner, locallimit.New(1, time.Minute, func() time.Time { return now }))
			rec := func(scope, key string) *idempotency.Record {
				return &idempotency.Record{Scope: scope, Key: key, Method: "POST", Path: "/x", Fingerprint: "fp",
					State: idempotency.StateExecuting, Point: idempotency.PointStarted, LockedUntil: now.Add(time.Minute),
					CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
			}

			require.NoError(t, store.Insert(ctx, rec("m1", "a")))
			err := store.Insert(ctx, rec("m1", "b"))
			require.ErrorIs(t, err, idempotency.ErrRateLimited)
			require.Equal(t, time.Minute, idempotency.RetryAfter(err), "until the window turns")
			_, err = inner.Get(ctx, "m1", "b", now)
			require.ErrorIs(t, err, idempotency.ErrNotFound, "a refused insert writes nothing")

			require.ErrorIs(t, store.Insert(ctx, rec("m1", "a")), idempotency.ErrKeyExists,
				"past the quota, a key with a record is found, not refused")
			require.NoError(t, store.Insert(ctx, rec("m2", "b")), "the quota is per scope")
		})
	}
}
