package localcache

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

func TestLocalCache(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	done := func(key string, expires time.Time) *idempotency.Record {
		return &idempotency.Record{Scope: "m1", Key: key, State: idempotency.StateCompleted,
			Answer: &idempotency.Answer{Status: 201, Final: true}, ExpiresAt: expires}
	}
	c := New(3)
	c.Put(done("a", now.Add(time.Hour)))
	c.Put(&idempotency.Record{Scope: "m1", Key: "open", State: idempotency.StateExecuting, ExpiresAt: now.Add(time.Hour)})
	c.Put(&idempotency.Record{Scope: "m1", Key: "noanswer", State: idempotency.StateCompleted, ExpiresAt: now.Add(time.Hour)})
	if c.Get("m1", "a", now) == nil {
		t.Fatal("a completed record is kept")
	}
	if c.Get("m2", "a", now) != nil {
		t.Fatal("scoped")
	}
	if c.Get("m1", "open", now) != nil || c.Get("m1", "noanswer", now) != nil {
		t.Fatal("only completed records with an answer enter")
	}
	if c.Get("m1", "a", now.Add(time.Hour)) != nil {
		t.Fatal("dropped at its expiry")
	}
	for i := range 10 {
		c.Put(done(fmt.Sprint(i), now.Add(time.Hour)))
	}
	if n := len(c.recs); n != 3 {
		t.Fatalf("bounded: %d entries", n)
	}
}
