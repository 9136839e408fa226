package gormstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/gormstore/gormtest"
)

// TestClaimDueSkipsACallAnotherHolds: an owner frozen inside a phase (a
// SIGSTOPped instance, a long pause) holds its call's row. The reconciler
// of every other instance must take the other due calls at once and leave
// that one for a later round, instead of waiting on its row with the rest
// of the round behind it. Before ClaimDue, the round read the due calls
// and then waited on the held row's lock for as long as the freeze lasted.
func TestClaimDueSkipsACallAnotherHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := gormtest.Open(t, "postgres")
	s := gormstore.New(db)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, id := range []string{"th_frozen", "th_other"} {
		require.NoError(t, s.InsertCall(ctx, &idempotency.Call{
			Scope: id, ID: id, Kind: "thing", ClientKey: "k", Key: id, KeyVersion: 1, State: idempotency.CallUnknown,
			AttemptedAt: now, DueAt: now.Add(-time.Minute), CreatedAt: now, UpdatedAt: now,
		}))
	}
	// The frozen owner: a transaction that locks its call and holds it
	// until release, then rolls back.
	locked, release, ended := make(chan error, 1), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		_ = dbtx.Transaction(ctx, db, func(ctx context.Context) error {
			_, err := s.LockCall(ctx, "th_frozen", "th_frozen")
			locked <- err
			<-release
			return errors.New("roll back")
		})
	}()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		<-ended
	})
	require.NoError(t, <-locked)

	claimCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	due, err := s.ClaimDue(claimCtx, now, now.Add(30*time.Second), 10, 10)
	require.NoError(t, err, "the claim must not wait for the held row")
	require.Len(t, due, 1)
	require.Equal(t, "th_other", due[0].ID)

	close(release)
	<-ended
	due, err = s.ClaimDue(ctx, now, now.Add(30*time.Second), 10, 10)
	require.NoError(t, err)
	require.Len(t, due, 1, "the held call is due the next round")
	require.Equal(t, "th_frozen", due[0].ID)
}
