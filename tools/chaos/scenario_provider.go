package main

import (
	"context"
	"fmt"
	"time"
)

// Provider chaos of the provider scenario: shares of first requests under a
// provider key whose answer is lost (the charge is made) or that answer 503
// (nothing is made), and the most latency added to the others.
const (
	chaosLost        = 0.20
	chaosUnavailable = 0.10
	chaosLatency     = 50 * time.Millisecond
)

// providerScenario: chaosPayments orders paid while the provider loses about
// 20% of its answers (after charging), answers 10% with an outage, and adds
// up to 50 ms to the rest. The API answers 202 for an unknown outcome and
// 502 for an outage; clients retry under the same key until the final 201 or
// 402, while the reconciler and webhooks settle the unknown ones.
func providerScenario(p profile) scenario {
	return scenario{
		name: "provider",
		about: fmt.Sprintf("%d orders paid by %d concurrent clients while the provider loses %.0f%% of first answers "+
			"(after charging), answers %.0f%% with 503 and adds up to %s of latency; 80%% of cards succeed, 20%% are declined.",
			p.chaosPayments, p.workers, chaosLost*100, chaosUnavailable*100, chaosLatency),
		setup: clusterConfig{lostRate: chaosLost, unavailableRate: chaosUnavailable, latency: chaosLatency},
		run: func(ctx context.Context, s *stage) (string, error) {
			c := directCaller(s)
			methods := make([]string, p.chaosPayments)
			for i := range methods {
				methods[i] = s.method()
			}
			err := pool(ctx, p.chaosPayments, p.workers, func(ctx context.Context, i int) error {
				s.orderAndPay(ctx, c, i, methods[i])
				return nil
			})
			if err != nil {
				return "", err
			}
			unknown := s.c.metric(ctx, "payment_provider_calls_total", `op="charge"`, `outcome="unknown"`)
			outage := s.c.metric(ctx, "payment_provider_calls_total", `op="charge"`, `outcome="not_executed"`)
			return fmt.Sprintf("%.0f charge calls with a lost answer, %.0f not executed (503, or the API's breaker open), latency ≤ %s",
				unknown, outage, chaosLatency), nil
		},
	}
}
