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
			res, err := a.find(t.Context(), "key", found, nil)
			require.NoError(t, err)
			require.Equal(t, "ch_1", res.ChargeID)
		})
	}
	require.Eventually(t, func() bool { return calls.Load() == 1 }, time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	require.EqualValues(t, 1, calls.Load(), "one call for 50 concurrent lookups")

	_, err := a.find(t.Context(), "key", found, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, calls.Load(), "held")
	clockMu.Lock()
	now = now.Add(time.Second)
	clockMu.Unlock()
	_, err = a.find(t.Context(), "key", found, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, calls.Load(), "asked again once the TTL passed")

	var absent atomic.Int64
	none := func(context.Context, string) (ChargeResult, error) {
		absent.Add(1)
		return ChargeResult{}, ErrProviderNoSuchCall
	}
	for range 3 {
		_, err := a.find(t.Context(), "other", none, nil)
		require.ErrorIs(t, err, ErrProviderNoSuchCall)
	}
	require.EqualValues(t, 3, absent.Load(), "an absence is never held")

	// Full: a new answer is not held, and the bound holds.
	for _, k := range []string{"k2", "k3", "k4"} {
		_, err := a.find(t.Context(), k, func(context.Context, string) (ChargeResult, error) { return ChargeResult{ChargeID: k}, nil }, nil)
		require.NoError(t, err)
	}
	require.LessOrEqual(t, len(a.held), 2)
}

// TestFinalAnswersPace: after an answer that is not final, lookups of the
// key go at most once per interval, however the events are sent (20
// senders at once, or one after another), and no event waits for the
// interval: it is answered with the last answer at once. Once the
// provider has the call, the lookup at the interval's end finds it and
// settles it, so a true event that raced its own call takes effect at most
// an interval later; then the final answer is held.
func TestFinalAnswersPace(t *testing.T) {
	const interval = 50 * time.Millisecond
	a := newFinalAnswers[ChargeResult](time.Second, 100, time.Second, time.Now)
	a.interval = interval
	t.Cleanup(a.close)

	var calls atomic.Int64
	var made atomic.Value // the key of the call the provider has
	made.Store("")
	provider := func(_ context.Context, key string) (ChargeResult, error) {
		calls.Add(1)
		if made.Load() == key {
			return ChargeResult{ChargeID: "ch_1", Succeeded: true}, nil
		}
		return ChargeResult{}, ErrProviderNoSuchCall
	}
	settled := make(chan string, 10)
	settle := func(_ context.Context, res ChargeResult) { settled <- res.ChargeID }

	flood := func(senders, each int, gap time.Duration) {
		start, before := time.Now(), calls.Load()
		var wg sync.WaitGroup
		for range senders {
			wg.Go(func() {
				for range each {
					_, err := a.find(t.Context(), "pending", provider, settle)
					require.ErrorIs(t, err, ErrProviderNoSuchCall)
					time.Sleep(gap)
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		lookups := calls.Load() - before
		t.Logf("%d senders × %d events about a call the provider does not have: %d lookups in %s",
			senders, each, lookups, elapsed.Round(time.Millisecond))
		require.LessOrEqual(t, lookups, int64(elapsed/interval)+2, "one lookup per interval")
	}
	flood(20, 25, 0)
	flood(1, 500, 0)
	flood(1, 100, interval/10) // one sender over some ten intervals
	require.Empty(t, settled, "nothing to settle while the provider has no call")

	// The call lands; an event inside the interval of the last absence is
	// answered at once with it, and the lookup at the interval's end finds
	// the charge and settles it. From here the interval is the default
	// (500 ms): "inside the interval" must outlast a loaded machine's
	// pause between two of the test's steps.
	a.mu.Lock() // a trailing lookup of "pending" may be at work
	a.interval = DefaultEventLookupInterval
	a.mu.Unlock()
	_, err := a.find(t.Context(), "landing", provider, settle)
	require.ErrorIs(t, err, ErrProviderNoSuchCall)
	made.Store("landing")
	_, err = a.find(t.Context(), "landing", provider, settle)
	require.ErrorIs(t, err, ErrProviderNoSuchCall, "inside the interval: the last answer, at once")
	select {
	case id := <-settled:
		require.Equal(t, "ch_1", id)
	case <-time.After(10 * a.interval):
		t.Fatal("the trailing lookup did not settle the call")
	}
	before := calls.Load()
	res, err := a.find(t.Context(), "landing", provider, settle)
	require.NoError(t, err)
	require.Equal(t, "ch_1", res.ChargeID)
	require.EqualValues(t, before, calls.Load(), "the final answer is held, the pace gone")

	// Closed: no lookup is set for later.
	made.Store("")
	_, err = a.find(t.Context(), "other", provider, settle)
	require.ErrorIs(t, err, ErrProviderNoSuchCall)
	a.close()
	before = calls.Load()
	_, err = a.find(t.Context(), "other", provider, settle)
	require.ErrorIs(t, err, ErrProviderNoSuchCall)
	time.Sleep(2 * a.interval)
	require.EqualValues(t, before, calls.Load(), "no trailing lookup once closed")
}
