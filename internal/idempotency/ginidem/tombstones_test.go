package ginidem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
)

// TestTombstones: with tombstones on, a key whose record expired executes
// nothing, from the moment it expires and after the janitor purged it:
// 409 (ErrKeyExpired) for the same request, 422 for another. Off, the key
// is new again (TestAtomicKeyExpires).
func TestTombstones(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{})
		store := gormstore.New(e.db, gormstore.WithTombstones(30*24*time.Hour))
		k := idempotency.New(store, idempotency.Config{TTL: time.Hour, Now: e.clock.Now, Transactor: store})
		mw := e.instance(k)
		e.engine.POST("/tomb/atomic", mw.Atomic(e.createThing))
		e.engine.POST("/tomb/guarded/:id", mw.Guarded(e.guardedAction(mw)))
		// The janitor's round, in batches of two.
		purge := func(ctx context.Context) (int, error) {
			total := 0
			for {
				n, err := store.PurgeExpired(ctx, e.clock.Now(), 2)
				total += n
				if err != nil || n < 2 {
					if err == nil {
						_, err = store.PurgeTombstones(ctx, e.clock.Now(), 2)
					}
					return total, err
				}
			}
		}

		require.Equal(t, 201, e.post("m1", "/tomb/atomic", "t-a", `{"name":"a"}`).Code)
		require.Equal(t, 201, e.post("m1", "/tomb/guarded/g1", "t-g", `{}`).Code)
		require.EqualValues(t, 1, e.orders(t, "m1"))
		executions := e.executions.Load()

		e.clock.Advance(time.Hour)
		for _, phase := range []string{"expired, not purged", "purged"} {
			w := e.post("m1", "/tomb/atomic", "t-a", `{"name":"a"}`)
			require.Equal(t, 409, w.Code, "%s: %s", phase, w.Body.String())
			require.Equal(t, "idempotency_key_expired", code(t, w), phase)
			require.Equal(t, 422, e.post("m1", "/tomb/atomic", "t-a", `{"name":"b"}`).Code, phase)
			w = e.post("m1", "/tomb/guarded/g1", "t-g", `{}`)
			require.Equal(t, 409, w.Code, "%s: %s", phase, w.Body.String())
			require.Equal(t, 422, e.post("m1", "/tomb/guarded/g2", "t-g", `{}`).Code, phase)
			require.EqualValues(t, 1, e.orders(t, "m1"), "%s: nothing executed", phase)
			require.Equal(t, executions, e.executions.Load(), "%s: nothing executed", phase)

			n, err := purge(context.Background())
			require.NoError(t, err)
			if phase == "expired, not purged" {
				require.Equal(t, 2, n, "both records purged, into tombstones")
			}
		}
		var stones int64
		require.NoError(t, e.db.Raw("SELECT count(*) FROM idempotency_tombstones").Scan(&stones).Error)
		require.EqualValues(t, 2, stones)

		// Another scope's same key is another operation.
		require.Equal(t, 201, e.post("m2", "/tomb/atomic", "t-a", `{"name":"a"}`).Code)

		// Past the tombstone's time the key is new again.
		e.clock.Advance(30*24*time.Hour + time.Second)
		_, err := purge(context.Background())
		require.NoError(t, err)
		require.NoError(t, e.db.Raw("SELECT count(*) FROM idempotency_tombstones WHERE merchant_id = 'm1'").Scan(&stones).Error)
		require.Zero(t, stones, "m1's tombstones ran out and were purged (m2's record has just become one)")
		require.Equal(t, 201, e.post("m1", "/tomb/atomic", "t-a", `{"name":"a"}`).Code)
		require.EqualValues(t, 2, e.orders(t, "m1"))
	})
}
