package idempotency

import (
	"fmt"
	"testing"
	"time"
)

func TestLocalCache(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	done := func(key string, expires time.Time) *Record {
		return &Record{Scope: "m1", Key: key, State: StateCompleted, Answer: &Answer{Status: 201, Final: true}, ExpiresAt: expires}
	}
	c := newLocalCache(3)
	c.put(done("a", now.Add(time.Hour)))
	c.put(&Record{Scope: "m1", Key: "open", State: StateExecuting, ExpiresAt: now.Add(time.Hour)})
	c.put(&Record{Scope: "m1", Key: "noanswer", State: StateCompleted, ExpiresAt: now.Add(time.Hour)})
	if c.get("m1", "a", now) == nil {
		t.Fatal("a completed record is kept")
	}
	if c.get("m2", "a", now) != nil {
		t.Fatal("scoped")
	}
	if c.get("m1", "open", now) != nil || c.get("m1", "noanswer", now) != nil {
		t.Fatal("only completed records with an answer enter")
	}
	if c.get("m1", "a", now.Add(time.Hour)) != nil {
		t.Fatal("dropped at its expiry")
	}
	for i := range 10 {
		c.put(done(fmt.Sprint(i), now.Add(time.Hour)))
	}
	if n := len(c.recs); n != 3 {
		t.Fatalf("bounded: %d entries", n)
	}
	off := newLocalCache(-1)
	off.put(done("a", now.Add(time.Hour)))
	if off.get("m1", "a", now) != nil {
		t.Fatal("a negative size turns it off")
	}
}
