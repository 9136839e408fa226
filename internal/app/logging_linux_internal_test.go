package app

import (
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestBufferedLogWritesThroughToATerminal: on a terminal (the far end of a
// pseudo-terminal here), a person reads each line as it comes, in colour.
func TestBufferedLogWritesThroughToATerminal(t *testing.T) {
	tty := openTerminal(t)
	w, done := BufferedLog(tty)
	done()
	require.Same(t, tty, w)
	t.Setenv("NO_COLOR", "")
	require.True(t, colourful(tty))
}

// openTerminal opens a new pseudo-terminal and returns its terminal end,
// as a shell's stdout is.
func openTerminal(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { _ = ptmx.Close() })
	fd := int(ptmx.Fd())
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0)) // unlockpt
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)                    // ptsname
	require.NoError(t, err)
	tty, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tty.Close() })
	return tty
}
