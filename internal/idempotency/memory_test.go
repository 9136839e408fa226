package idempotency

import (
	"testing"
	"time"
)

// TestNoCacheKeepsNothing: a Keeper given no Cache keeps no record in
// this process; every replay reads the store.
func TestNoCacheKeepsNothing(t *testing.T) {
	c := Config{}.withDefaults().Cache
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c.Keep(&Record{Scope: "m1", Key: "a", State: StateCompleted, Answer: &Answer{Status: 201, Final: true}, ExpiresAt: now.Add(time.Hour)})
	if c.Get(t.Context(), "m1", "a", now) != nil {
		t.Fatal("without a Cache nothing is kept")
	}
}
