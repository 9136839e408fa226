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
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil { // unlockpt
		t.Skipf("no pseudo-terminals here: unlocking one: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN) // ptsname
	if err != nil {
		t.Skipf("no pseudo-terminals here: naming one: %v", err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here (is devpts mounted?): %v", err)
	}
	t.Cleanup(func() { _ = tty.Close() })
	return tty
}

// TestTerminalLeavesAPipeNonBlocking: asking whether a pipe is a terminal
// leaves it in the mode it was in (os.File.Fd would make it blocking, for
// every process that shares it).
func TestTerminalLeavesAPipeNonBlocking(t *testing.T) {
	r, w, err := os.Pipe() // non-blocking, in Go's poller
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.True(t, nonBlocking(t, w))
	require.False(t, terminal(w))
	require.True(t, nonBlocking(t, w), "the pipe is still non-blocking")
}

func nonBlocking(t *testing.T, f *os.File) bool {
	t.Helper()
	c, err := f.SyscallConn()
	require.NoError(t, err)
	var flags int
	var ferr error
	require.NoError(t, c.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }))
	require.NoError(t, ferr)
	return flags&unix.O_NONBLOCK != 0
}
