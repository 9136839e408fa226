package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// postgresScenario: clients pay orders while the PostgreSQL server crashes
// (SIGQUIT: every backend gone at once, as after a power cut of the server
// process) and starts again, p.postgresCrashes times. Requests in flight
// must get 503 service_unavailable or succeed; afterwards nothing may be
// half-done (the audit: an order without its record, a completed record
// without its effect, a payment without its charge or the reverse).
func postgresScenario(p profile) scenario {
	return scenario{
		name: "postgres",
		about: fmt.Sprintf("at least %d orders paid by %d concurrent clients while the PostgreSQL server crashes (SIGQUIT) %d times "+
			"and restarts 1 to 2 s later; in-flight requests may only get 503 or succeed.", p.postgresOps, p.workers, p.postgresCrashes),
		setup: clusterConfig{latency: 20 * time.Millisecond},
		run: func(ctx context.Context, s *stage) (string, error) {
			pg := s.c.sys.pg
			var crashes atomic.Int64
			var down atomic.Int64
			crasherDone := make(chan error, 1)
			faultsDone := make(chan struct{})
			go func() {
				defer close(faultsDone)
				for range p.postgresCrashes {
					if !sleepCtx(ctx, s.between(time.Second, 2500*time.Millisecond)) {
						break
					}
					start := time.Now()
					pg.Crash()
					crashes.Add(1)
					sleepCtx(ctx, s.between(time.Second, 2*time.Second))
					if err := pg.Start(60 * time.Second); err != nil {
						crasherDone <- err
						return
					}
					down.Add(int64(time.Since(start)))
				}
				crasherDone <- nil
			}()
			c := directCaller(s)
			ops, err := load(ctx, p.postgresOps, p.workers, faultsDone, func(ctx context.Context, i int) {
				s.orderAndPay(ctx, c, i, s.method())
			})
			if cerr := <-crasherDone; cerr != nil {
				return "", fmt.Errorf("restart postgres: %w", cerr)
			}
			if err != nil {
				return "", err
			}
			if int(crashes.Load()) < p.postgresCrashes {
				return "", fmt.Errorf("the load ended after %d of %d crashes; make the scenario longer", crashes.Load(), p.postgresCrashes)
			}
			return fmt.Sprintf("%d PostgreSQL crashes, down %.1f s in all; %d operations", crashes.Load(), time.Duration(down.Load()).Seconds(), ops), nil
		},
	}
}
