package app

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEveryTicksFromTheStart: rounds every interval until ctx ends, the
// first at once only when asked (retention's way, not the reconciler's).
func TestEveryTicksFromTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, atStart := range []bool{true, false} {
			ctx, cancel := context.WithCancel(t.Context())
			start := time.Now()
			var at []time.Duration
			every(ctx, time.Minute, atStart, func(context.Context) {
				at = append(at, time.Since(start))
				if len(at) == 3 {
					cancel()
				}
			})
			cancel()
			want := []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute}
			if atStart {
				want = []time.Duration{0, time.Minute, 2 * time.Minute}
			}
			require.Equal(t, want, at, "at start: %v", atStart)
		}
	})
}
