package gormstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/gormstore/gormtest"
)

// TestRefusedRecordRollsBackTheDeferredWrites: in an Atomic request's
// transaction the business rows and the record go to the database together
// (on PostgreSQL with the commit, in one round trip). Whatever the key's
// state, the rows commit exactly when the record does: a free key and an
// expired record (replaced) commit both; a live record and a live
// tombstone commit neither.
func TestRefusedRecordRollsBackTheDeferredWrites(t *testing.T) {
	for _, dialect := range gormtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			db := gormtest.Open(t, dialect)
			require.NoError(t, db.Exec("CREATE TABLE things (id text PRIMARY KEY)").Error)
			s := gormstore.New(db, gormstore.WithTombstones(time.Hour))
			ctx := context.Background()
			t0 := time.Now().UTC().Truncate(time.Microsecond)
			things := func() (ids []string) {
				require.NoError(t, db.Raw("SELECT id FROM things ORDER BY id").Scan(&ids).Error)
				return ids
			}
			create := func(thing string, rec *idempotency.Record) error {
				return s.InTx(ctx, func(ctx context.Context) error {
					if err := dbtx.Exec(ctx, db, "INSERT INTO things (id) VALUES (?)", thing); err != nil {
						return err
					}
					return s.Insert(ctx, rec)
				})
			}

			require.NoError(t, create("a", executing("m1", "free", t0)), "a free key")
			require.ErrorIs(t, create("b", executing("m1", "free", t0)), idempotency.ErrKeyExists, "a live record")
			require.Equal(t, []string{"a"}, things())

			// An expired record whose tombstone time has passed is replaced.
			old := executing("m1", "old", t0.Add(-3*time.Hour))
			old.ExpiresAt = t0.Add(-2 * time.Hour)
			require.NoError(t, s.Insert(ctx, old))
			fresh := executing("m1", "old", t0)
			require.NoError(t, create("c", fresh), "an expired record past its tombstone time")
			require.Equal(t, idempotency.FirstFence(t0), fresh.Fence)

			// A purged record's live tombstone refuses the key.
			gone := executing("m1", "gone", t0.Add(-time.Hour))
			gone.ExpiresAt = t0.Add(-time.Minute)
			require.NoError(t, s.Insert(ctx, gone))
			n, err := s.PurgeExpired(ctx, t0, 10)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.ErrorIs(t, create("d", executing("m1", "gone", t0)), idempotency.ErrKeyExists, "a live tombstone")

			require.Equal(t, []string{"a", "c"}, things())
			// The connection each refusal used serves the next transaction.
			require.NoError(t, create("e", executing("m1", "next", t0)))
			require.Equal(t, []string{"a", "c", "e"}, things())
		})
	}
}
