package main

import (
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGCMeterAddsTheCPUOfTheCollectionsWhileOn(t *testing.T) {
	line := func(n int, cpu string) string {
		return fmt.Sprintf("gc %d @0.316s 4%%: 0.018+1.2+0.021 ms clock, %s ms cpu, 4->4->1 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P\n", n, cpu)
	}
	g := &gcMeter{}
	write := func(s string) {
		t.Helper()
		if _, err := g.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	write(line(1, "1+1/1/1+1")) // before start: not counted
	g.start()
	write(`{"level":"INFO","msg":"outbox event"}` + "\n")
	l := line(2, "0.037+0.31/1.0/0.27+0.042")
	write(l[:20]) // a line may arrive in pieces
	write(l[20:] + line(3, "0.5+0/0.5/0+0"))
	cpu, cycles := g.stop()
	write(line(4, "1+1/1/1+1")) // after stop: not counted
	if want := time.Duration((0.037 + 0.31 + 1.0 + 0.27 + 0.042 + 1.0) * float64(time.Millisecond)); cycles != 2 || cpu != want {
		t.Fatalf("got %v in %d collections, want %v in 2", cpu, cycles, want)
	}
}

func TestProcessUsageCountsCPUAndSwitches(t *testing.T) {
	before, err := processUsage(os.Getpid())
	require.NoError(t, err)
	// Work in the kernel and in user space, and threads that sleep and
	// wake: each sleep is a voluntary switch.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		_, err := os.ReadFile("/proc/self/stat")
		require.NoError(t, err)
		time.Sleep(time.Millisecond)
	}
	after, err := processUsage(os.Getpid())
	require.NoError(t, err)
	used := after.minus(before)
	require.Positive(t, used.switches, "sleeping a hundred times switches")
	require.GreaterOrEqual(t, used.sys, time.Duration(0))
	require.Equal(t, used.user+used.sys, used.cpu())
	cpu, err := processCPU(os.Getpid())
	require.NoError(t, err)
	require.GreaterOrEqual(t, cpu, after.cpu(), "CPU only grows")
}

// TestLogCounter: ERROR lines and lines naming a key are counted across
// writes that split lines, each line once, and their kinds keep no value.
func TestLogCounter(t *testing.T) {
	c := &logCounter{next: io.Discard}
	for _, w := range []string{
		"2026-12-05 LOG:  ready\n2026-12-05 ERR", "OR:  duplicate key\n",
		"DETAIL:  Key (merchant_id, idempotency_key)=(mch_acme, k1) already exists.\n",
		"2026-12-05 ERROR:  the idempotency key is taken\nSTATEMENT:  WITH inserted AS (...)\n",
		`2026-12-05 ERROR:  invalid input syntax for type uuid: "k2-secret"` + "\n",
	} {
		if _, err := c.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	if c.errors() != 3 || c.keys() != 1 {
		t.Fatalf("errors %d, keys %d; want 3 (one split across writes) and 1", c.errors(), c.keys())
	}
	// The kinds keep the message up to the values, and no value.
	want := `"duplicate key" × 1, "invalid input syntax for type uuid" × 1, "the idempotency key is taken" × 1`
	if got := c.errorKinds(); got != want {
		t.Fatalf("kinds %s, want %s", got, want)
	}
}
