package flights_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/flights"
)

// TestOneLeaderHandsOver: of several callers on one id, one leads; the
// others wait and take what it hands over, doing no work of their own.
func TestOneLeaderHandsOver(t *testing.T) {
	g := flights.New[string, int]()
	wait := func() context.Context { return t.Context() }
	fl, handed, waited, err := g.Acquire(wait, "k")
	require.NoError(t, err)
	require.NotNil(t, fl)
	require.Nil(t, handed)
	require.False(t, waited, "the first caller does not wait")

	var wg sync.WaitGroup
	got := make(chan int, 5)
	for range 5 {
		wg.Go(func() {
			fl, handed, waited, err := g.Acquire(wait, "k")
			if assert.NoError(t, err) && assert.NotNil(t, handed) {
				assert.Nil(t, fl, "a waiter handed a value leads nothing")
				assert.True(t, waited)
				got <- *handed
			}
		})
	}
	other, _, waited, err := g.Acquire(wait, "other")
	require.NoError(t, err)
	require.False(t, waited, "another id has a flight of its own")
	g.Land("other", other, nil)

	time.Sleep(10 * time.Millisecond) // let the waiters queue
	v := 42
	g.Land("k", fl, &v)
	wg.Wait()
	close(got)
	require.Len(t, got, 5)
	for n := range got {
		require.Equal(t, 42, n)
	}
}

// TestNothingHandedNextLeads: a leader that hands nothing over lets one
// waiter lead next, and the others wait for that one.
func TestNothingHandedNextLeads(t *testing.T) {
	g := flights.New[string, int]()
	wait := func() context.Context { return t.Context() }
	first, _, _, err := g.Acquire(wait, "k")
	require.NoError(t, err)

	leaders := make(chan *flights.Flight[int], 2)
	for range 2 {
		go func() {
			fl, handed, _, err := g.Acquire(wait, "k")
			if err == nil && handed == nil {
				leaders <- fl
			}
		}()
	}
	time.Sleep(10 * time.Millisecond)
	g.Land("k", first, nil)
	second := <-leaders
	select {
	case <-leaders:
		t.Fatal("two waiters lead at once")
	case <-time.After(20 * time.Millisecond):
	}
	g.Land("k", second, nil)
	third := <-leaders
	g.Land("k", third, nil)
}

// TestWaitEnds: a waiter whose wait ends first gets its context's error
// and no flight.
func TestWaitEnds(t *testing.T) {
	g := flights.New[string, int]()
	fl, _, _, err := g.Acquire(func() context.Context { return t.Context() }, "k")
	require.NoError(t, err)
	defer g.Land("k", fl, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	got, handed, waited, err := g.Acquire(func() context.Context { return ctx }, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Nil(t, got)
	require.Nil(t, handed)
	require.True(t, waited)
}
