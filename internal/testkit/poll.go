package testkit

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, failing the test when within has
// passed first. Tests wait for a state this way, never by sleeping.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
