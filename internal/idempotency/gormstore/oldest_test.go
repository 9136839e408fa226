package gormstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/gormstore/gormtest"
)

// TestPurgePlanIgnoresOldStatistics: a backlog that expired after the
// table's last ANALYZE is estimated at one row. The earlier statement then
// walked the whole backlog for every batch of the janitor (over a minute a
// batch at a million records, and no purge at all under load); the purge
// must choose the batch on the expiry index and delete it by row address,
// whatever the estimate.
func TestPurgePlanIgnoresOldStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := gormtest.Open(t, "postgres")
	s := gormstore.New(db)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	seed := func(prefix string, n int, expires time.Time) {
		require.NoError(t, db.Exec(`
INSERT INTO idempotency_records (merchant_id, idempotency_key, method, path, fingerprint, state, recovery_point,
    fence, locked_until, created_at, updated_at, expires_at)
SELECT 'm' || (i % 4), ? || i, 'POST', '/v1/things', 'fp', 'completed', 'started', 1, ?, ?, ?, ?::timestamptz + i * interval '1 ms'
FROM generate_series(1, ?) AS i`, prefix, now, now, now, expires, n).Error)
	}
	require.NoError(t, db.Exec(`ALTER TABLE idempotency_records SET (autovacuum_enabled = off)`).Error)
	seed("live-", 1000, now.Add(ttl))
	require.NoError(t, db.Exec(`ANALYZE idempotency_records`).Error)
	seed("old-", 20000, now.Add(-time.Hour))

	for _, plan := range gormtest.Explain(t, db, s.DeleteExpired(500), now) {
		require.Equal(t, "Tid Scan", plan.Children["Outer"], "%s: the delete reads only the batch's rows: %s", plan.Mode, plan.JSON)
		require.Equal(t, "Limit", plan.Children["InitPlan"], "%s: the batch is chosen once: %s", plan.Mode, plan.JSON)
	}

	total := 0
	for {
		n, err := s.PurgeExpired(ctx, now, 500)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		require.LessOrEqual(t, n, 500)
		total += n
	}
	require.Equal(t, 20000, total)
	var left int64
	require.NoError(t, db.Raw(`SELECT count(*) FROM idempotency_records`).Scan(&left).Error)
	require.EqualValues(t, 1000, left, "only the expired records are gone")
}

// TestPurgeSkipsARecordARequestHolds: the janitor never waits on a row
// lock. A record that a request holds while the batch is chosen is left
// for a later round, and when the request renews it, it stays; the rest of
// the batch goes (with tombstones, each with its tombstone).
func TestPurgeSkipsARecordARequestHolds(t *testing.T) {
	for _, tombstones := range []bool{false, true} {
		t.Run(fmt.Sprintf("tombstones=%v", tombstones), func(t *testing.T) {
			t.Parallel()
			db := gormtest.Open(t, "postgres")
			var opts []gormstore.Option
			if tombstones {
				opts = append(opts, gormstore.WithTombstones(30*24*time.Hour))
			}
			s := gormstore.New(db, opts...)
			t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			now := t0.Add(time.Hour)
			for _, key := range []string{"a", "held", "b"} {
				rec := executing("m1", key, t0)
				rec.ExpiresAt = t0.Add(time.Minute)
				require.NoError(t, s.Insert(context.Background(), rec))
			}

			holder := db.Begin()
			require.NoError(t, holder.Error)
			defer holder.Rollback()
			require.NoError(t, holder.Exec(`SELECT 1 FROM idempotency_records WHERE merchant_id = 'm1' AND idempotency_key = 'held' FOR UPDATE`).Error)

			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			n, err := s.PurgeExpired(ctx, now, 10)
			require.NoError(t, err, "the purge does not wait for the request")
			require.Equal(t, 2, n)

			require.NoError(t, holder.Exec(`UPDATE idempotency_records SET expires_at = ? WHERE merchant_id = 'm1' AND idempotency_key = 'held'`,
				now.Add(ttl)).Error)
			require.NoError(t, holder.Commit().Error)
			n, err = s.PurgeExpired(ctx, now, 10)
			require.NoError(t, err)
			require.Zero(t, n, "the renewed record is not expired any more")

			got, err := s.Get(ctx, "m1", "held", now)
			require.NoError(t, err)
			require.Equal(t, idempotency.StateExecuting, got.State)
			for _, key := range []string{"a", "b"} {
				stone, err := s.Get(ctx, "m1", key, now)
				if !tombstones {
					require.ErrorIs(t, err, idempotency.ErrNotFound)
					continue
				}
				require.NoError(t, err, "a purged record leaves its tombstone")
				require.Equal(t, idempotency.StateExpired, stone.State)
				require.Empty(t, stone.Point, "read from the tombstone, not the record")
			}
		})
	}
}
