package retrywrite_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/retrywrite"
)

var errAway = errors.New("the database is away")

// A write is tried until it succeeds, and no more.
func TestRetryUntilTheWriteSucceeds(t *testing.T) {
	w := retrywrite.New(time.Millisecond, 4*time.Millisecond, time.Minute)
	var tries atomic.Int32
	w.Retry(func(context.Context) error {
		if tries.Add(1) < 3 {
			return errAway
		}
		return nil
	})
	require.NoError(t, w.Close(context.Background()))
	require.EqualValues(t, 3, tries.Load(), "two failures, then the success ends it")
}

// A write fenced out stops at once: another owner holds the record.
func TestRetryStopsWhenFenced(t *testing.T) {
	w := retrywrite.New(time.Millisecond, time.Millisecond, time.Minute)
	var tries atomic.Int32
	w.Retry(func(context.Context) error {
		tries.Add(1)
		return idempotency.ErrFenced
	})
	require.NoError(t, w.Close(context.Background()))
	require.EqualValues(t, 1, tries.Load())
}

// A write that keeps failing is given up at the limit, its context done.
func TestRetryGivesUpAtTheLimit(t *testing.T) {
	w := retrywrite.New(time.Millisecond, 2*time.Millisecond, 30*time.Millisecond)
	var tries atomic.Int32
	w.Retry(func(ctx context.Context) error {
		tries.Add(1)
		return errAway
	})
	require.NoError(t, w.Close(context.Background()))
	require.Greater(t, tries.Load(), int32(1))
}

// Close stops writes still under way when its own context ends first, and
// says so.
func TestCloseStopsWritesAtItsDeadline(t *testing.T) {
	w := retrywrite.New(time.Millisecond, time.Millisecond, time.Hour)
	stopped := make(chan struct{})
	w.Retry(func(ctx context.Context) error {
		<-ctx.Done()
		close(stopped)
		return ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, w.Close(ctx), context.DeadlineExceeded)
	select {
	case <-stopped:
	default:
		t.Fatal("Close returned before the write it stopped ended")
	}
}
