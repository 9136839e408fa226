package idempotency_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestStoreContract runs one suite against every Store implementation and
// dialect: what the middleware relies on must hold on each.
func TestStoreContract(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, dialect)
			storeContract(t, idempotency.NewGormStore(db.DB), db.DB)
		})
	}
}

const ttl = 24 * time.Hour

func executing(merchant, key string, now time.Time) *idempotency.Record {
	return &idempotency.Record{
		MerchantID: merchant, Key: key, Method: "POST", Path: "/v1/things", Fingerprint: "fp-1",
		State: idempotency.StateExecuting, RecoveryPoint: idempotency.PointStarted,
		LockedUntil: now.Add(30 * time.Second), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(ttl),
	}
}

func storeContract(t *testing.T, s idempotency.Store, db *gorm.DB) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	resp := idempotency.Response{Status: 201, ContentType: "application/json", Location: "/v1/things/1", Body: []byte(`{"id":"1"}`)}

	t.Run("new key reserves, second insert finds it", func(t *testing.T) {
		rec := executing("m1", "new-key", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.EqualValues(t, 1, rec.Fence)
		require.ErrorIs(t, s.Insert(ctx, executing("m1", "new-key", t0)), idempotency.ErrKeyExists)

		got, err := s.Get(ctx, "m1", "new-key", t0)
		require.NoError(t, err)
		require.Equal(t, idempotency.StateExecuting, got.State)
		require.Equal(t, "fp-1", got.Fingerprint)
		require.Equal(t, t0, got.CreatedAt)
		require.Nil(t, got.Response)
	})

	t.Run("completed record replays its response byte for byte", func(t *testing.T) {
		rec := executing("m1", "replay", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.NoError(t, s.Complete(ctx, "m1", "replay", rec.Fence, resp, t0))
		got, err := s.Get(ctx, "m1", "replay", t0)
		require.NoError(t, err)
		require.Equal(t, idempotency.StateCompleted, got.State)
		require.Equal(t, &resp, got.Response)
	})

	t.Run("inserted already complete", func(t *testing.T) {
		rec := executing("m1", "complete-insert", t0)
		rec.State, rec.Response = idempotency.StateCompleted, &resp
		require.NoError(t, s.Insert(ctx, rec))
		got, err := s.Get(ctx, "m1", "complete-insert", t0)
		require.NoError(t, err)
		require.Equal(t, &resp, got.Response)
	})

	t.Run("keys are scoped to the merchant", func(t *testing.T) {
		require.NoError(t, s.Insert(ctx, executing("m1", "shared", t0)))
		other := executing("m2", "shared", t0)
		other.Fingerprint = "fp-other"
		require.NoError(t, s.Insert(ctx, other))
		got, err := s.Get(ctx, "m2", "shared", t0)
		require.NoError(t, err)
		require.Equal(t, "fp-other", got.Fingerprint)
		_, err = s.Get(ctx, "m3", "shared", t0)
		require.ErrorIs(t, err, idempotency.ErrNotFound)
	})

	t.Run("fifty concurrent inserts, one owner", func(t *testing.T) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := 0, 0
		for range 50 {
			wg.Go(func() {
				err := s.Insert(ctx, executing("m1", "race", t0))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case err == idempotency.ErrKeyExists:
					lost++
				default:
					t.Errorf("insert: %v", err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, 1, won)
		require.Equal(t, 49, lost)
	})

	t.Run("stale lock is taken over and the old owner is fenced out", func(t *testing.T) {
		rec := executing("m1", "takeover", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.NoError(t, s.Checkpoint(ctx, "m1", "takeover", rec.Fence, "charged", t0))

		// Still locked: no takeover.
		require.ErrorIs(t, s.TakeOver(ctx, "m1", "takeover", rec.Fence, t0.Add(time.Second), t0.Add(31*time.Second)), idempotency.ErrFenced)

		later := t0.Add(31 * time.Second)
		require.NoError(t, s.TakeOver(ctx, "m1", "takeover", rec.Fence, later, later.Add(30*time.Second)))
		// A second contender with the same view loses.
		require.ErrorIs(t, s.TakeOver(ctx, "m1", "takeover", rec.Fence, later, later.Add(30*time.Second)), idempotency.ErrFenced)

		got, err := s.Get(ctx, "m1", "takeover", later)
		require.NoError(t, err)
		require.Equal(t, rec.Fence+1, got.Fence)
		require.Equal(t, "charged", got.RecoveryPoint, "the new owner resumes from the recovery point")

		// The stale owner can write nothing.
		require.ErrorIs(t, s.Checkpoint(ctx, "m1", "takeover", rec.Fence, "other", later), idempotency.ErrFenced)
		require.ErrorIs(t, s.Complete(ctx, "m1", "takeover", rec.Fence, resp, later), idempotency.ErrFenced)
		require.ErrorIs(t, s.Release(ctx, "m1", "takeover", rec.Fence, later), idempotency.ErrFenced)
		require.NoError(t, s.Complete(ctx, "m1", "takeover", got.Fence, resp, later))
	})

	t.Run("release deletes a record with nothing durable", func(t *testing.T) {
		rec := executing("m1", "release-fresh", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.NoError(t, s.Release(ctx, "m1", "release-fresh", rec.Fence, t0))
		_, err := s.Get(ctx, "m1", "release-fresh", t0)
		require.ErrorIs(t, err, idempotency.ErrNotFound)
		require.NoError(t, s.Insert(ctx, executing("m1", "release-fresh", t0)), "the key is free again")
	})

	t.Run("release keeps and unlocks a record past its first step", func(t *testing.T) {
		rec := executing("m1", "release-resume", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.NoError(t, s.Checkpoint(ctx, "m1", "release-resume", rec.Fence, "payment_created", t0))
		require.NoError(t, s.Release(ctx, "m1", "release-resume", rec.Fence, t0.Add(time.Second)))
		got, err := s.Get(ctx, "m1", "release-resume", t0.Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, "payment_created", got.RecoveryPoint)
		require.False(t, got.LockedUntil.After(t0.Add(time.Second)), "unlocked: a retry may take it over at once")
		require.NoError(t, s.TakeOver(ctx, "m1", "release-resume", got.Fence, t0.Add(time.Second), t0.Add(time.Minute)))
	})

	t.Run("expired record is absent and its key new again", func(t *testing.T) {
		rec := executing("m1", "ttl", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.NoError(t, s.Complete(ctx, "m1", "ttl", rec.Fence, resp, t0))
		_, err := s.Get(ctx, "m1", "ttl", t0.Add(ttl-time.Second))
		require.NoError(t, err)

		after := t0.Add(ttl)
		_, err = s.Get(ctx, "m1", "ttl", after)
		require.ErrorIs(t, err, idempotency.ErrNotFound)
		fresh := executing("m1", "ttl", after)
		fresh.Fingerprint = "fp-new"
		require.NoError(t, s.Insert(ctx, fresh))
		require.Equal(t, rec.Fence+1, fresh.Fence, "the fence keeps growing across reuse")
		got, err := s.Get(ctx, "m1", "ttl", after)
		require.NoError(t, err)
		require.Equal(t, "fp-new", got.Fingerprint)
		require.Nil(t, got.Response)
		require.Equal(t, idempotency.StateExecuting, got.State)
	})

	t.Run("purge deletes only expired records, in batches", func(t *testing.T) {
		for i := range 7 {
			rec := executing("purge", fmt.Sprintf("old-%d", i), t0)
			rec.ExpiresAt = t0.Add(time.Minute)
			require.NoError(t, s.Insert(ctx, rec))
		}
		require.NoError(t, s.Insert(ctx, executing("purge", "live", t0)))
		now := t0.Add(time.Hour)
		n, err := s.PurgeExpired(ctx, now, 5)
		require.NoError(t, err)
		require.Equal(t, 5, n)
		n, err = s.PurgeExpired(ctx, now, 5)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		n, err = s.PurgeExpired(ctx, now, 5)
		require.NoError(t, err)
		require.Equal(t, 0, n)
		_, err = s.Get(ctx, "purge", "live", now)
		require.NoError(t, err)
	})

	t.Run("insert joins the caller's transaction and rolls back with it", func(t *testing.T) {
		err := database.Transaction(ctx, db, func(ctx context.Context) error {
			require.NoError(t, s.Insert(ctx, executing("m1", "tx-rollback", t0)))
			return fmt.Errorf("boom")
		})
		require.Error(t, err)
		_, err = s.Get(ctx, "m1", "tx-rollback", t0)
		require.ErrorIs(t, err, idempotency.ErrNotFound)
	})
}
