package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestByRoundTakesTheMedianOfTheRoundsRatios: the verdict's ratio is the
// median of the ratios round by round, not the ratio of the medians (which
// here would be 300/200 = 1.5); phases that did not run the same rounds,
// or a round without requests, fall back to the ratio of the figures.
func TestByRoundTakesTheMedianOfTheRoundsRatios(t *testing.T) {
	// cpu is a phase shown at shown µs per request, with its rounds.
	cpu := func(shown int, rounds ...int) result {
		r := result{Spent: time.Duration(shown) * time.Microsecond, Requests: 1}
		for _, u := range rounds {
			r.Runs = append(r.Runs, result{Spent: time.Duration(u) * time.Microsecond, Requests: 1})
		}
		return r
	}
	whole := cpuFigure(result.ProcessCPUPerRequest)

	got, note := byRound(cpu(300, 300, 400, 260), cpu(200, 150, 200, 260), whole)
	require.InDelta(t, 2.0, got, 1e-9, "300/150, 400/200, 260/260: the median of 2, 2 and 1")
	require.Equal(t, "; round by round 2.00, 2.00, 1.00, median 2.00", note)

	got, note = byRound(cpu(300), cpu(200), whole)
	require.InDelta(t, 1.5, got, 1e-9)
	require.Empty(t, note)

	got, note = byRound(cpu(300, 300, 400), cpu(200, 150, 200, 260), whole)
	require.InDelta(t, 1.5, got, 1e-9, "not the same rounds")
	require.Empty(t, note)

	got, note = byRound(cpu(300, 300, 400, 260), cpu(200, 150, 0, 260), whole)
	require.InDelta(t, 1.5, got, 1e-9, "a round without a figure")
	require.Empty(t, note)

	// A rate is compared the same way: requests over the window.
	rate := func(rounds ...int) result {
		r := result{Requests: rounds[0], Elapsed: time.Second}
		for _, n := range rounds[1:] {
			r.Runs = append(r.Runs, result{Requests: n, Elapsed: time.Second})
		}
		return r
	}
	got, note = byRound(rate(4500, 4500, 2600, 5000), rate(2400, 2400, 1400, 1900), result.Rate)
	require.InDelta(t, 4500.0/2400, got, 1e-9, "4500/2400, 2600/1400, 5000/1900: the median of 1.88, 1.86 and 2.63")
	require.Equal(t, "; round by round 1.88, 1.86, 2.63, median 1.88", note)
}
