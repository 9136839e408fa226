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
// never held, so a real event racing its own charge is not called forged
// (the pace, which TestFinalAnswersPace covers, is off here: interval 0).
func TestFinalAnswers(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var clockMu sync.Mutex
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	a := newFinalAnswers[ChargeResult](time.Second, 2, time.Second, clock)
	a.interval = 0

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

// TestFinalAnswersPace: after an answer that is not final, lookups of the
// key go at most once per interval, every event arriving meanwhile waiting
// for the next one and sharing it; and once the provider has the call, an
// event waits at most one interval for it, so a true event that raced its
// own call is confirmed, not called forged.
func TestFinalAnswersPace(t *testing.T) {
	const interval = 50 * time.Millisecond
	a := newFinalAnswers[ChargeResult](time.Second, 100, time.Second, time.Now)
	a.interval = interval

	var calls atomic.Int64
	var made atomic.Bool
	provider := func(context.Context, string) (ChargeResult, error) {
		calls.Add(1)
		if made.Load() {
			return ChargeResult{ChargeID: "ch_1", Succeeded: true}, nil
		}
		return ChargeResult{}, ErrProviderNoSuchCall
	}

	// A flood: 20 senders, 25 events each, back to back.
	start := time.Now()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 25 {
				_, err := a.find(t.Context(), "pending", provider)
				require.ErrorIs(t, err, ErrProviderNoSuchCall)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("500 events about a call the provider does not have: %d lookups in %s", calls.Load(), elapsed.Round(time.Millisecond))
	require.LessOrEqual(t, calls.Load(), int64(elapsed/interval)+2, "one lookup per interval")

	// The call lands; the next event, inside the interval of the last
	// absence, waits for a fresh lookup and gets the charge.
	before := calls.Load()
	made.Store(true)
	res, err := a.find(t.Context(), "pending", provider)
	require.NoError(t, err)
	require.Equal(t, "ch_1", res.ChargeID)
	require.EqualValues(t, before+1, calls.Load())
	_, err = a.find(t.Context(), "pending", provider)
	require.NoError(t, err)
	require.EqualValues(t, before+1, calls.Load(), "the final answer is held, the pace gone")

	// An event whose sender gives up while it waits stops waiting.
	made.Store(false)
	_, err = a.find(t.Context(), "other", provider)
	require.ErrorIs(t, err, ErrProviderNoSuchCall)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = a.find(ctx, "other", provider)
	require.ErrorIs(t, err, context.Canceled)
}
