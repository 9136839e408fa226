package handlers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
)

// resourceGate bounds the writes to one resource (an order, a payment) at
// work at once in this instance. A write to an order locks the order's row
// for its transaction; when the row is held elsewhere (an instance frozen
// inside a payment's phase, a long transaction), every request for that
// order waits on the lock while holding a pool connection, and enough of
// them drain the pool for every other merchant. Past the limit, a request
// waits for its turn here, holding no connection, for at most wait (the
// database's own lock timeout: no longer than it would have waited on the
// row), and is then answered 503 with Retry-After, nothing done.
type resourceGate struct {
	limit int
	wait  time.Duration

	mu    sync.Mutex
	slots map[string]*gateSlot
}

// gateSlot is one resource's turns, and how many requests hold or wait
// for one (the slot is dropped with the last).
type gateSlot struct {
	turns chan struct{}
	users int
}

// newResourceGate returns a gate of limit writes per resource, or nil (no
// gate) when limit is zero.
func newResourceGate(limit int, wait time.Duration) *resourceGate {
	if limit <= 0 {
		return nil
	}
	return &resourceGate{limit: limit, wait: wait, slots: map[string]*gateSlot{}}
}

// hold runs h in a turn of the route's resource: the merchant's, the
// route's first segment under /v1 ("orders", "payments") and its id. A nil
// gate runs h as it is. It wraps the handler, not the route: a replay
// answered by the idempotency layer never waits here.
func (g *resourceGate) hold(h ginidem.Handler) ginidem.Handler {
	if g == nil {
		return h
	}
	guarded := g.holdGuarded(func(c *gin.Context, _ *idempotency.Op) (idempotency.Answer, error) { return h(c) })
	return func(c *gin.Context) (idempotency.Answer, error) { return guarded(c, nil) }
}

// holdGuarded is hold for a Guarded route's handler.
func (g *resourceGate) holdGuarded(h ginidem.GuardedHandler) ginidem.GuardedHandler {
	if g == nil {
		return h
	}
	return func(c *gin.Context, op *idempotency.Op) (idempotency.Answer, error) {
		kind, _, _ := strings.Cut(strings.TrimPrefix(c.FullPath(), "/v1/"), "/")
		leave, err := g.enter(c.Request.Context(), MerchantID(c)+"\x00"+kind+"\x00"+c.Param("id"))
		if err != nil {
			return idempotency.Answer{}, err
		}
		defer leave()
		return h(c, op)
	}
}

// enter takes a turn of the resource named key, waiting up to g.wait. It
// returns how to give it back, or an error wrapping database.ErrBusy (the
// wait ran out) or ctx's.
func (g *resourceGate) enter(ctx context.Context, key string) (func(), error) {
	g.mu.Lock()
	s := g.slots[key]
	if s == nil {
		s = &gateSlot{turns: make(chan struct{}, g.limit)}
		g.slots[key] = s
	}
	s.users++
	g.mu.Unlock()
	gone := func() {
		g.mu.Lock()
		if s.users--; s.users == 0 {
			delete(g.slots, key)
		}
		g.mu.Unlock()
	}
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	select {
	case s.turns <- struct{}{}:
		return func() {
			<-s.turns
			gone()
		}, nil
	case <-timer.C:
		gone()
		return nil, fmt.Errorf("%w: %d writes to it at work already, for %s", database.ErrBusy, g.limit, g.wait)
	case <-ctx.Done():
		gone()
		return nil, ctx.Err()
	}
}
