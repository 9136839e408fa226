package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// killScenario: clients pay orders, retrying under their keys against any
// instance, while the harness SIGKILLs an API instance at a random moment
// every second or so and starts it again shortly after: at least p.kills
// kills, never the last live instance. Requests cut by a kill are retried on
// another instance; a record left executing is taken over after the lock
// timeout and resumed from its recovery point.
func killScenario(p profile) scenario {
	return scenario{
		name: "kill",
		about: fmt.Sprintf("at least %d orders paid by %d concurrent clients (10%% with a provider that answers after 2 s) "+
			"while the API instances are SIGKILLed at random moments, %d times, each restarted 0.2 to 0.8 s later.",
			p.killOps, p.workers, p.kills),
		setup: clusterConfig{latency: 30 * time.Millisecond},
		run: func(ctx context.Context, s *stage) (string, error) {
			var killed, restarts atomic.Int64
			killerDone := make(chan struct{})
			var restartsWG sync.WaitGroup
			var restartErr atomic.Value
			restarting := make([]atomic.Bool, len(s.c.apis))
			go func() {
				defer close(killerDone)
				for killed.Load() < int64(p.kills) {
					if !sleepCtx(ctx, s.between(400*time.Millisecond, 1200*time.Millisecond)) {
						return
					}
					// Only instances that are up and serving: one still
					// starting is left alone, so each kill hits a live
					// server.
					var live []int
					for i, a := range s.c.apis {
						if a.Running() && !restarting[i].Load() {
							live = append(live, i)
						}
					}
					if len(live) < 2 {
						continue // keep one instance serving
					}
					i := live[s.intN(len(live))]
					victim := s.c.apis[i]
					restarting[i].Store(true)
					victim.Kill()
					killed.Add(1)
					pause := s.between(200*time.Millisecond, 800*time.Millisecond)
					restartsWG.Go(func() {
						defer restarting[i].Store(false)
						time.Sleep(pause)
						if err := victim.Start(60 * time.Second); err != nil {
							restartErr.Store(err)
							return
						}
						restarts.Add(1)
					})
				}
			}()
			c := directCaller(s)
			ops, err := load(ctx, p.killOps, p.workers, killerDone, func(ctx context.Context, i int) {
				s.orderAndPay(ctx, c, i, s.slowMethod())
			})
			<-killerDone
			restartsWG.Wait()
			if err != nil {
				return "", err
			}
			if e := restartErr.Load(); e != nil {
				return "", fmt.Errorf("restart: %v", e)
			}
			return fmt.Sprintf("%d SIGKILLs of API instances, %d restarts, %d operations", killed.Load(), restarts.Load(), ops), nil
		},
	}
}

// sleepCtx waits d or until ctx ends, and reports whether it waited d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// between is a random duration in [lo, hi).
func (s *stage) between(lo, hi time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return lo + time.Duration(s.rnd.Int64N(int64(hi-lo)))
}

func (s *stage) intN(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rnd.IntN(n)
}

// slowMethod is method, with one payment in ten made with pm_fault_slow
// (the provider charges at once and answers 2 s later), so that kills land
// while charges are in flight.
func (s *stage) slowMethod() string {
	if s.intN(10) == 0 {
		return "pm_fault_slow"
	}
	return s.method()
}
