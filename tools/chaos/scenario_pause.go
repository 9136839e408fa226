package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/idemkeys/payments/internal/problem"
	"github.com/idemkeys/payments/internal/testkit"
)

// Windows of the pause scenario: an attempt that never reached the provider
// may be canceled after pauseCancelAfter (PENDING_CANCEL_AFTER of its
// instances), and the frozen instance stays frozen past the lock timeout
// and that window, with a margin of reconciler rounds.
const (
	pauseCancelAfter = 3 * time.Second
	pauseMargin      = 2 * time.Second
)

// pauseScenario: p.pauses times, API instance 1 sends two charges and is
// frozen (SIGSTOP) the moment both reach the proxy in front of its provider,
// that is once it has committed everything it does before calling; it stays
// frozen past the lock and cancel windows while the other instances
// reconcile. One of the two keys (the takeover) is retried meanwhile through
// instance 2, whose charge the provider refuses with 503 until the thaw. Then
// the held charges reach the provider late, the instance thaws, and the
// clients finish as careful clients do: retry under the key until a final
// answer, and pay the order again under a new key if told its payment was
// canceled. The audit then finds any order charged twice and any orphan
// charge (of a payment we consider canceled or failed) left unhandled.
func pauseScenario(p profile) scenario {
	// One proxy per instance, started by startCluster: instance 1's holds,
	// the others' refuse the takeover's charge.
	fronts := make([]*testkit.FaultProxy, instances)
	return scenario{
		name: "pause",
		about: fmt.Sprintf("%d times, an API instance is frozen (SIGSTOP) once two charges of its own are on their way, "+
			"for the lock timeout (%s) plus PENDING_CANCEL_AFTER (%s) plus %s; one of the two keys is retried through "+
			"another instance, which the provider answers 503; then the frozen charges reach the provider late and the "+
			"instance thaws. A client told its payment was canceled pays the order again under a new key.",
			p.pauses, lockTimeout, pauseCancelAfter, pauseMargin),
		setup: clusterConfig{
			env: []string{"PENDING_CANCEL_AFTER=" + pauseCancelAfter.String()},
			providerVia: func(i int, upstream string) (string, error) {
				fronts[i] = &testkit.FaultProxy{Upstream: upstream}
				return fronts[i].Start()
			},
		},
		run: func(ctx context.Context, s *stage) (string, error) {
			defer func() {
				for _, f := range fronts {
					if f != nil {
						f.Close()
					}
				}
			}()
			db, err := sql.Open("pgx", s.c.dbURL)
			if err != nil {
				return "", err
			}
			defer func() { _ = db.Close() }()
			pr := &pauseRound{s: s, c: directCaller(s), db: db, fronts: fronts}
			var frozen time.Duration
			for i := range p.pauses {
				d, err := pr.run(ctx, i)
				if err != nil {
					return "", fmt.Errorf("pause %d: %w", i+1, err)
				}
				frozen += d
			}
			return fmt.Sprintf("%d SIGSTOPs of an instance holding 2 charges (%s frozen on average), %d takeovers answered 503; "+
				"retries answered 502 while a frozen charge was on its way: %d; orders paid again after a cancel: %d",
				p.pauses, (frozen / time.Duration(max(1, p.pauses))).Round(100*time.Millisecond), p.pauses,
				pr.told502, pr.paidAgain), nil
		},
	}
}

// pauseRound runs the rounds of the pause scenario.
type pauseRound struct {
	s      *stage
	c      *caller
	db     *sql.DB
	fronts []*testkit.FaultProxy

	told502, paidAgain int
}

// run is round i: it returns how long the instance was frozen.
func (r *pauseRound) run(ctx context.Context, i int) (time.Duration, error) {
	s, c := r.s, r.c
	owner, other := s.c.apis[0], 1
	ops := []struct{ order, key string }{
		{key: s.key("pay-paused", i)},
		{key: s.key("pay-takeover", i)},
	}
	for j := range ops {
		id, err := c.createOrder(ctx, s.key(fmt.Sprintf("order-%d", j), i), 5000+int64(100*i+j))
		if err != nil {
			return 0, err
		}
		ops[j].order = id
	}

	// The owner freezes the moment its second charge is held.
	front := r.fronts[0]
	front.HoldWhere(testkit.Charge, func() {
		if front.Held() == len(ops) {
			owner.Send(syscall.SIGSTOP)
		}
	})
	var sent sync.WaitGroup
	for _, op := range ops {
		sent.Go(func() {
			// One attempt that reaches the provider, answered after the
			// thaw (or never): the client's own retries come later,
			// through any instance. An earlier round's late answers count
			// as failures in the owner's breaker for the merchant, which
			// may be open now: its 502 ("nothing charged") is sent again
			// under the same key, as a client would, until a charge is
			// held.
			deadline := time.Now().Add(30 * time.Second)
			for {
				a, _, _, err := c.send(ctx, s.c.apiURL(0), payPath(op.order), op.key, payBody("pm_card_visa"))
				if err != nil || a.status != http.StatusBadGateway || time.Now().After(deadline) || !sleepCtx(ctx, time.Second) {
					return
				}
			}
		})
	}
	if err := waitFor(ctx, 30*time.Second, func() bool { return front.Held() == len(ops) }); err != nil {
		owner.Send(syscall.SIGCONT)
		return 0, fmt.Errorf("the owner's charges never reached its proxy: %w", err)
	}
	paused := time.Now()
	frozenUntil := paused.Add(lockTimeout + pauseCancelAfter + pauseMargin)

	// The takeover: the provider refuses the takeover payment's charge from
	// every other instance until the thaw, and the client retries through
	// one of them once the owner's lock has run out.
	takeover := ops[1]
	var paymentID string
	if err := r.db.QueryRowContext(ctx, `SELECT id FROM payments WHERE order_id = $1`, takeover.order).Scan(&paymentID); err != nil {
		owner.Send(syscall.SIGCONT)
		return 0, fmt.Errorf("the takeover's payment: %w", err)
	}
	for _, f := range r.fronts[1:] {
		f.RefuseWhere(chargeOf(paymentID))
	}
	var retried answer
	err := waitFor(ctx, 30*time.Second, func() bool {
		a, _, _, err := c.send(ctx, s.c.apiURL(other), payPath(takeover.order), takeover.key, payBody("pm_card_visa"))
		retried = a
		return err == nil && (a.status != http.StatusConflict || a.code != problem.CodeIdempotencyInProgress)
	})
	if err != nil {
		owner.Send(syscall.SIGCONT)
		return 0, fmt.Errorf("the takeover retry: %w", err)
	}
	if retried.status == http.StatusBadGateway {
		// "Nothing was charged" while the frozen owner's call may still land.
		r.told502++
		s.problem("key %s: a retry was answered 502 (nothing charged) while the frozen owner's charge was on its way", takeover.key)
	}
	frozenUntil = laterOf(frozenUntil, time.Now().Add(pauseCancelAfter+pauseMargin))

	// The freeze itself: a fault's duration, while the other instances'
	// reconcilers have their rounds.
	if !sleepCtx(ctx, time.Until(frozenUntil)) {
		owner.Send(syscall.SIGCONT)
		return 0, ctx.Err()
	}
	for _, f := range r.fronts[1:] {
		f.RefuseWhere(nil)
	}
	relCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = front.Release(relCtx)
	cancel()
	owner.Send(syscall.SIGCONT)
	frozen := time.Since(paused)
	if err != nil {
		return frozen, fmt.Errorf("the frozen charges did not reach the provider: %w", err)
	}
	sent.Wait()

	// The clients finish: each key until its final answer, and a new key
	// for an order whose payment was canceled.
	var finished sync.WaitGroup
	var mu sync.Mutex
	for j, op := range ops {
		finished.Go(func() {
			res, err := c.pay(ctx, op.order, op.key, "pm_card_visa")
			if err != nil || res.code != problem.CodePaymentCanceled {
				return
			}
			mu.Lock()
			r.paidAgain++
			mu.Unlock()
			_, _ = c.pay(ctx, op.order, s.key(fmt.Sprintf("pay-again-%d", j), i), "pm_card_visa")
		})
	}
	finished.Wait()
	return frozen, nil
}

// chargeOf picks the provider's charge requests for our payment id (the
// charge's reference).
func chargeOf(paymentID string) func(r *http.Request, body []byte) bool {
	return func(r *http.Request, body []byte) bool {
		var ch struct {
			Reference string `json:"reference"`
		}
		return testkit.Charge(r, body) && json.Unmarshal(body, &ch) == nil && ch.Reference == paymentID
	}
}

// payPath is the path that pays an order.
func payPath(orderID string) string { return "/v1/orders/" + orderID + "/payments" }

// waitFor polls cond until it holds, within d.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("not within " + d.String())
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return nil
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
