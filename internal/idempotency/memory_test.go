package idempotency

import (
	"testing"
	"time"
)

// TestNoMemoryKeepsNothing: a Keeper given no Memory keeps no record in
// this process; every replay reads the Cache or the store.
func TestNoMemoryKeepsNothing(t *testing.T) {
	m := Config{}.withDefaults().Memory
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.Put(&Record{Scope: "m1", Key: "a", State: StateCompleted, Answer: &Answer{Status: 201, Final: true}, ExpiresAt: now.Add(time.Hour)})
	if m.Get("m1", "a", now) != nil {
		t.Fatal("without a Memory nothing is kept")
	}
}
