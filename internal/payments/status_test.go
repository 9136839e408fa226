package payments

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNothingMovesBackwards pins the state machine: the sources of each
// state are what the conditional updates allow.
func TestNothingMovesBackwards(t *testing.T) {
	cases := map[Status][]Status{
		StatusPending:    nil,
		StatusProcessing: {StatusPending},
		StatusSucceeded:  {StatusPending, StatusProcessing},
		StatusFailed:     {StatusPending, StatusProcessing},
	}
	for to, want := range cases {
		t.Run(string(to), func(t *testing.T) {
			require.Equal(t, want, to.sources())
		})
	}
	require.True(t, StatusSucceeded.Final())
	require.True(t, StatusFailed.Final())
	require.False(t, StatusProcessing.Final())
}
