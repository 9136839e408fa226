package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// redisScenario: clients pay orders while the private redis-server is
// SIGKILLed and started again, p.redisKills times. Redis only makes replays
// fast and wakes waiters across instances; exactly-once rests on PostgreSQL,
// so nothing may change but latency.
func redisScenario(p profile) scenario {
	return scenario{
		name: "redis",
		about: fmt.Sprintf("at least %d orders paid by %d concurrent clients, each operation's request sent twice at once "+
			"(to two instances), while redis-server is SIGKILLed %d times and restarted 1 to 2 s later.",
			p.redisOps, p.workers, p.redisKills),
		setup: clusterConfig{latency: 20 * time.Millisecond},
		run: func(ctx context.Context, s *stage) (string, error) {
			r := s.c.sys.redis
			var kills atomic.Int64
			var down atomic.Int64 // nanoseconds
			killerDone := make(chan error, 1)
			faultsDone := make(chan struct{})
			go func() {
				defer close(faultsDone)
				for range p.redisKills {
					if !sleepCtx(ctx, s.between(time.Second, 2500*time.Millisecond)) {
						break
					}
					r.Kill()
					kills.Add(1)
					start := time.Now()
					sleepCtx(ctx, s.between(time.Second, 2*time.Second))
					if err := r.Start(30 * time.Second); err != nil {
						killerDone <- err
						return
					}
					down.Add(int64(time.Since(start)))
				}
				killerDone <- nil
			}()
			c := directCaller(s)
			ops, err := load(ctx, p.redisOps, p.workers, faultsDone, func(ctx context.Context, i int) {
				s.twinOrderAndPay(ctx, c, i)
			})
			if kerr := <-killerDone; kerr != nil {
				return "", fmt.Errorf("restart redis: %w", kerr)
			}
			if err != nil {
				return "", err
			}
			if int(kills.Load()) < p.redisKills {
				return "", fmt.Errorf("the load ended after %d of %d Redis kills; make the scenario longer", kills.Load(), p.redisKills)
			}
			return fmt.Sprintf("%d Redis SIGKILLs, down %.1f s in all; %d operations", kills.Load(), time.Duration(down.Load()).Seconds(), ops), nil
		},
	}
}

// twinOrderAndPay runs one customer's order and payment twice at once under
// the same keys, as a client that timed out and retried while its first
// request still ran: the two land on different instances and must meet
// through the database (and Redis, while it lives).
func (s *stage) twinOrderAndPay(ctx context.Context, c *caller, i int) {
	method := s.method()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.orderAndPay(ctx, c, i, method)
	}()
	s.orderAndPay(ctx, c, i, method)
	<-done
}
