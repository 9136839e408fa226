package payments

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFinalAnswers: concurrent lookups of one key share one call, a final
// answer is held until its TTL, and "no such call" (like any error) is
// never held, so a real event racing its own charge is not called forged.
func TestFinalAnswers(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	a := newFinalAnswers[ChargeResult](time.Second, 2, time.Second, clock)

	var calls atomic.Int64
	release := make(chan struct{})
	found := func(context.Context, string) (ChargeResult, error) {
		calls.Add(1)
		<-release
		return ChargeResult{ChargeID: "ch_1", Succeeded: true}, nil
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			res, err := a.find(t.Context(), "key", found)
			require.NoError(t, err)
			require.Equal(t, "ch_1", res.ChargeID)
		})
	}
	require.Eventually(t, func() bool { return calls.Load() == 1 }, time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	require.EqualValues(t, 1, calls.Load(), "one call for 50 concurrent lookups")

	_, err := a.find(t.Context(), "key", found)
	require.NoError(t, err)
	require.EqualValues(t, 1, calls.Load(), "held")
	clockMu.Lock()
	now = now.Add(time.Second)
	clockMu.Unlock()
	_, err = a.find(t.Context(), "key", found)
	require.NoError(t, err)
	require.EqualValues(t, 2, calls.Load(), "asked again once the TTL passed")

	var absent atomic.Int64
	none := func(context.Context, string) (ChargeResult, error) {
		absent.Add(1)
		return ChargeResult{}, ErrProviderNoSuchCall
	}
	for range 3 {
		_, err := a.find(t.Context(), "other", none)
		require.ErrorIs(t, err, ErrProviderNoSuchCall)
	}
	require.EqualValues(t, 3, absent.Load(), "an absence is never held")

	// Full: a new answer is not held, and the bound holds.
	for _, k := range []string{"k2", "k3", "k4"} {
		_, err := a.find(t.Context(), k, func(context.Context, string) (ChargeResult, error) { return ChargeResult{ChargeID: k}, nil })
		require.NoError(t, err)
	}
	require.LessOrEqual(t, len(a.held), 2)
}
