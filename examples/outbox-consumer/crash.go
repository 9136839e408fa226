package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// TEST ONLY. The crash tests (main_test.go) set CONSUMER_CRASH_AT to make
// this process kill itself with SIGKILL at a chosen point, the way a power
// cut or the OOM killer would: no deferred call runs, nothing is flushed,
// no acknowledgement is sent. A deployment never sets it; a fork may delete
// this file and the two crashAt calls.
//
//	CONSUMER_CRASH_AT=before-apply   after the message was read, before Apply
//	CONSUMER_CRASH_AT=after-commit   after Apply committed, before the ack
//	CONSUMER_CRASH_AFTER=N           at the N-th time the point is reached [1]
const (
	crashBeforeApply = "before-apply"
	crashAfterCommit = "after-commit"
)

// crasher is the test hook; the zero value never crashes.
type crasher struct {
	at    string
	after int
	seen  int
}

func newCrasher(at, after string) (*crasher, error) {
	c := &crasher{at: at, after: 1}
	switch at {
	case "", crashBeforeApply, crashAfterCommit:
	default:
		return nil, fmt.Errorf("CONSUMER_CRASH_AT must be empty, %s or %s, got %q", crashBeforeApply, crashAfterCommit, at)
	}
	if after != "" {
		n, err := strconv.Atoi(after)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("CONSUMER_CRASH_AFTER must be a positive integer, got %q", after)
		}
		c.after = n
	}
	return c, nil
}

// crashAt kills the process if point is the configured one and has been
// reached CONSUMER_CRASH_AFTER times. Messages are handled one at a time,
// so no lock is needed.
func (c *crasher) crashAt(point, eventID string) {
	if c == nil || c.at != point {
		return
	}
	c.seen++
	if c.seen < c.after {
		return
	}
	fmt.Fprintf(os.Stderr, "CONSUMER_CRASH_AT=%s: killing myself at event %s\n", point, eventID)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
