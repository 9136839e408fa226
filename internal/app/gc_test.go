package app_test

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app"
)

// TestTuneGC: without GOGC the API collects at GCPercent; with it, the
// runtime's own reading of GOGC stands.
func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	require.Equal(t, app.GCPercent, app.TuneGC([]string{"PATH=/bin", "LOG_LEVEL=info"}))
	require.Equal(t, app.GCPercent, debug.SetGCPercent(77), "set in the runtime")

	require.Equal(t, 77, app.TuneGC([]string{"GOGC=77"}), "the runtime read GOGC=77 at start; it stands")
	require.Equal(t, 77, debug.SetGCPercent(77))
}
