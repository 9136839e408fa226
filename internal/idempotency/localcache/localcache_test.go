package localcache

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func done(key string, expires time.Time) *idempotency.Record {
	return &idempotency.Record{Scope: "m1", Key: key, State: idempotency.StateCompleted,
		Answer: &idempotency.Answer{Status: 201, Final: true}, ExpiresAt: expires}
}

func TestLocalCache(t *testing.T) {
	ctx := t.Context()
	c := New(3, nil)
	c.Keep(done("a", now.Add(time.Hour)))
	c.Keep(&idempotency.Record{Scope: "m1", Key: "open", State: idempotency.StateExecuting, ExpiresAt: now.Add(time.Hour)})
	c.Keep(&idempotency.Record{Scope: "m1", Key: "noanswer", State: idempotency.StateCompleted, ExpiresAt: now.Add(time.Hour)})
	if c.Get(ctx, "m1", "a", now) == nil {
		t.Fatal("a completed record is kept")
	}
	if c.Get(ctx, "m2", "a", now) != nil {
		t.Fatal("scoped")
	}
	if c.Get(ctx, "m1", "open", now) != nil || c.Get(ctx, "m1", "noanswer", now) != nil {
		t.Fatal("only completed records with an answer enter")
	}
	if c.Get(ctx, "m1", "a", now.Add(time.Hour)) != nil {
		t.Fatal("dropped at its expiry")
	}
	for i := range 10 {
		c.Keep(done(fmt.Sprint(i), now.Add(time.Hour)))
	}
	if n := len(c.recs); n != 3 {
		t.Fatalf("bounded: %d entries", n)
	}
	if ch, stop := c.Subscribe("m1", "a"); ch != nil {
		stop()
		t.Fatal("alone, it cannot wake a waiter: the waiters poll")
	}
}

// TestInFrontOfNext: a miss asks the next cache and keeps what it finds;
// a kept record and a change reach the next cache, whose subscription
// wakes the waiters.
func TestInFrontOfNext(t *testing.T) {
	ctx := t.Context()
	next := &countingCache{recs: map[string]*idempotency.Record{"b": done("b", now.Add(time.Hour))}}
	c := New(10, next)

	first, second := c.Get(ctx, "m1", "b", now), c.Get(ctx, "m1", "b", now)
	if first == nil || second == nil {
		t.Fatal("a record of the next cache is found, then kept")
	}
	if next.gets != 1 {
		t.Fatalf("asked the next cache %d times, want once: the second read is from memory", next.gets)
	}
	if c.Get(ctx, "m1", "none", now) != nil || next.gets != 2 {
		t.Fatalf("a miss here is asked of the next cache (%d asks)", next.gets)
	}

	c.Keep(done("c", now.Add(time.Hour)))
	if next.recs["c"] == nil {
		t.Fatal("a kept record reaches the next cache")
	}
	c.Changed("m1", "c")
	if next.changed != 1 {
		t.Fatal("a change reaches the next cache")
	}
	ch, stop := c.Subscribe("m1", "c")
	defer stop()
	if ch != next.wake {
		t.Fatal("the waiters hear the next cache")
	}
}

// countingCache is a next cache in memory that counts what it is asked.
type countingCache struct {
	recs          map[string]*idempotency.Record
	gets, changed int
	wake          chan struct{}
}

func (n *countingCache) Get(_ context.Context, _, key string, _ time.Time) *idempotency.Record {
	n.gets++
	return n.recs[key]
}
func (n *countingCache) Keep(rec *idempotency.Record) { n.recs[rec.Key] = rec }
func (n *countingCache) Changed(string, string)       { n.changed++ }
func (n *countingCache) Subscribe(string, string) (<-chan struct{}, func()) {
	n.wake = make(chan struct{})
	return n.wake, func() {}
}
