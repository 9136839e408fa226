package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/idemkeys/payments/internal/problem"
)

// refundAmount is what each failover client refunds of its payment: a part,
// never the whole (the orders cost 1000 and more), so that a charge made
// twice stays visible at the provider after the client's refund.
const refundAmount = 100

// failoverScenario: the database is a primary with a streaming standby, and
// the instances reach it by a URL naming both (target_session_attrs=
// read-write). Clients make orders, pay them and refund a part, each step
// retried under its key until a final answer. Under load the standby stops
// receiving the write-ahead log (the link between them stalls), then the
// primary's machine dies (every process SIGKILLed) and, p.failoverDetect
// later, the standby is promoted. The instances find the new primary by
// themselves; clients keep retrying.
//
// With asynchronous replication the primary acknowledged commits the
// standby never got: those rows are gone. A client whose request was in
// flight retries into a database that has never heard of its key; whether
// the provider then charges a second time depends only on the provider key
// the retry sends. With synchronous replication every acknowledged commit
// was on the standby first.
func failoverScenario(p profile, synchronous bool) scenario {
	mode, name := "asynchronous", "failover-async"
	if synchronous {
		mode, name = "synchronous", "failover-sync"
	}
	return scenario{
		name: name,
		about: fmt.Sprintf("%s replication to one standby; %d orders made ahead (and replicated), then paid and partly "+
			"refunded by %d concurrent clients (the provider answers within 0 to 200 ms), new customers following; the standby "+
			"stops receiving for %s under load, then every process of the primary is SIGKILLed and the standby promoted %s "+
			"later; the instances' DATABASE_URL names both servers (target_session_attrs=read-write).",
			mode, p.failoverOps, p.workers, p.failoverStall, p.failoverDetect),
		// The provider's latency keeps charges and refunds in flight when
		// the primary dies, which is the case that matters.
		setup: clusterConfig{latency: 200 * time.Millisecond, replicated: true, synchronous: synchronous},
		run: func(ctx context.Context, s *stage) (string, error) {
			f := &failoverFigures{synchronous: synchronous, started: time.Now()}
			s.failover = f
			// A payment or refund whose order or payment was lost answers
			// 404: a consequence of the loss, which the audit counts.
			s.expectStatus = func(status int, code string) bool {
				return expectedStatus(status, code) || status == http.StatusNotFound && code == problem.CodeNotFound
			}
			if err := f.markOutbox(ctx, s.c); err != nil {
				return "", err
			}
			c := directCaller(s)
			c.attempt = f.attempted
			// The orders are made first, and are on the standby before
			// anything breaks, as orders are made well before they are
			// paid: what the failover hits is payments and refunds.
			orders := make([]string, p.failoverOps)
			err := pool(ctx, len(orders), p.workers, func(ctx context.Context, i int) error {
				var err error
				orders[i], err = c.createOrder(ctx, s.key("order", i), orderAmount(i))
				return err
			})
			if err == nil {
				err = s.c.primary.WaitReplayed(s.c.standby, time.Minute)
			}
			if err != nil {
				return "", err
			}
			faultsDone := make(chan struct{})
			faultErr := make(chan error, 1)
			go func() {
				defer close(faultsDone)
				faultErr <- s.failOver(ctx, f, p)
			}()
			// Past the orders made ahead, new customers make their own
			// until the faults are over.
			ops, err := load(ctx, len(orders), p.workers, faultsDone, func(ctx context.Context, i int) {
				if i < len(orders) {
					s.payAndRefund(ctx, c, i, orders[i])
					return
				}
				s.orderPayRefund(ctx, c, i)
			})
			if ferr := <-faultErr; ferr != nil {
				return "", ferr
			}
			if err != nil {
				return "", err
			}
			f.ops = ops
			return fmt.Sprintf("%s replication stalled %.1f s (%s of write-ahead log not on the standby at the kill), "+
				"the primary's machine killed, the standby promoted %.1f s later; %d operations",
				mode, f.killed.Sub(f.stalled).Seconds(), bytesText(f.walBehind), f.promoted.Sub(f.killed).Seconds(), ops), nil
		},
		audit: func(ctx context.Context, s *stage) (auditResult, error) {
			return auditFailover(ctx, s, p.settle)
		},
	}
}

// failOver injects the faults once the load runs: the stall, the kill and
// the promotion, noting when each happened.
func (s *stage) failOver(ctx context.Context, f *failoverFigures, p profile) error {
	c := s.c
	if !sleepCtx(ctx, 500*time.Millisecond) { // payments get going, replicated
		return ctx.Err()
	}
	c.link.Stall()
	f.stalled = time.Now()
	if !sleepCtx(ctx, p.failoverStall) {
		return ctx.Err()
	}
	// How far the standby is behind, read just before the kill (both reads
	// take a few milliseconds, during which the primary writes on).
	primaryAt, err := c.primary.WALPosition()
	if err != nil {
		return fmt.Errorf("primary's position: %w", err)
	}
	standbyAt, err := c.standby.WALPosition()
	if err != nil {
		return fmt.Errorf("standby's position: %w", err)
	}
	f.walBehind = primaryAt - standbyAt
	if err := c.primary.KillMachine(); err != nil {
		return fmt.Errorf("kill the primary: %w", err)
	}
	f.killed = time.Now()
	if !sleepCtx(ctx, p.failoverDetect) {
		return ctx.Err()
	}
	// The old primary never comes back (it would be a second primary), and
	// the standby's link to it goes.
	c.link.Close()
	if err := c.standby.Promote(); err != nil {
		return fmt.Errorf("promote the standby: %w", err)
	}
	f.promoted = time.Now()
	return nil
}

// orderPayRefund is one customer: an order, its payment, and (when the
// payment succeeded) a refund of a part, each under its own key and
// retried until a final answer.
func (s *stage) orderPayRefund(ctx context.Context, c *caller, i int) {
	orderID, err := c.createOrder(ctx, s.key("order", i), orderAmount(i))
	if err != nil {
		if ctx.Err() == nil {
			s.problem("operation %d: %v", i, err)
		}
		return
	}
	s.payAndRefund(ctx, c, i, orderID)
}

// payAndRefund pays operation i's order and, when the payment succeeded,
// refunds a part of it.
func (s *stage) payAndRefund(ctx context.Context, c *caller, i int, orderID string) {
	paid, err := c.pay(ctx, orderID, s.key("pay", i), s.method())
	if err != nil || paid.status != http.StatusCreated || paid.id == "" {
		return // declined, the order lost (404), or given up (a finding)
	}
	body := fmt.Appendf(nil, `{"amount":%d}`, refundAmount)
	_, _ = c.until(ctx, "/v1/payments/"+paid.id+"/refunds", s.key("refund", i), body)
}

// orderAmount is the amount of operation i's order: unique within a
// scenario, so that a charge at the provider names its operation by its
// amount alone, whatever became of the payment row it was made for.
func orderAmount(i int) int64 { return 1000 + int64(i) }

// operationOf is the operation whose order costs amount, or -1.
func operationOf(amount int64) int {
	if amount < 1000 {
		return -1
	}
	return int(amount - 1000)
}

// failoverFigures is what a failover scenario measured.
type failoverFigures struct {
	synchronous bool
	started     time.Time
	// When the link stalled, the primary's machine was killed and the
	// standby promoted; walBehind is how many bytes of write-ahead log the
	// standby lacked at the kill.
	stalled, killed, promoted time.Time
	walBehind                 int64
	ops                       int
	// outboxFrom is the Redis stream's last entry before the scenario.
	outboxFrom string

	mu       sync.Mutex
	attempts []attempt

	// The audit's figures.
	acknowledged, lost  int            // final answers received; of those, resources the new primary lacks
	lostByKind          map[string]int // by resource: order, payment, refund
	chargedTwice        int            // operations with more than one net charge at the provider
	maxNetCharges       int
	refundedTwice       int // operations whose refund the provider made more than once
	sweptCharges        int // provider charges since the stall whose reference the database lacks
	sweptRefunds        int
	events, eventsAgain int // outbox events published; of those, again for one operation
	eventsTwice         int // the same event id published more than once
	executing           int // idempotency records left executing, no client retrying them
	failed              int // attempts without an answer or with a 5xx, after the stall
	unavailable         time.Duration
	reconnect           time.Duration
	longest             time.Duration // the longest attempt sent after the stall
}

// attempt is one request as its client saw it.
type attempt struct {
	sent, ended time.Time
	status      int // 0: no answer
}

func (f *failoverFigures) attempted(sent time.Time, status int) {
	f.mu.Lock()
	f.attempts = append(f.attempts, attempt{sent: sent, ended: time.Now(), status: status})
	f.mu.Unlock()
}

// switchFigures reads the attempts: how many failed from the stall on, how
// long writes were unavailable (from the kill to the first answer, sent
// after it, that was not a failure) and how long the instances took to
// find the new primary (from the promotion to that answer).
func (f *failoverFigures) switchFigures() {
	f.mu.Lock()
	defer f.mu.Unlock()
	var firstOK time.Time
	for _, a := range f.attempts {
		if a.sent.Before(f.stalled) {
			continue
		}
		f.longest = max(f.longest, a.ended.Sub(a.sent))
		if a.status == 0 || a.status >= 500 {
			f.failed++
			continue
		}
		if a.sent.After(f.killed) && (firstOK.IsZero() || a.ended.Before(firstOK)) {
			firstOK = a.ended
		}
	}
	if !firstOK.IsZero() {
		f.unavailable = firstOK.Sub(f.killed)
		f.reconnect = firstOK.Sub(f.promoted)
	}
}

// bytesText spells a number of bytes in kB or MB.
func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
