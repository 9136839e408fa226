package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ttl is IDEMPOTENCY_TTL in the expiry scenario.
const ttl = 5 * time.Second

// ttlScenario: keys expire. Each of p.ttlKeys customers makes an order and
// pays it, three clients at once per key; the keys then expire (the janitor
// purges them) and the same requests are sent again under the same keys,
// three at once. An expired key is a new key: the order request makes one
// new order (one more, not two), and the payment request, now a new
// operation on a paid order, gets 409 order_already_paid and charges
// nothing.
func ttlScenario(p profile) scenario {
	return scenario{
		name: "ttl",
		about: fmt.Sprintf("IDEMPOTENCY_TTL=%s: %d customers each make and pay an order, three clients at once per key; "+
			"once every key has expired, the same requests again under the same keys, three at once.", ttl, p.ttlKeys),
		setup: clusterConfig{ttl: ttl},
		run: func(ctx context.Context, s *stage) (string, error) {
			s.allowedOrders = map[string]int{}
			for i := range p.ttlKeys {
				s.allowedOrders[s.key("order", i)] = 2
			}
			c := directCaller(s)
			firstOrders := make([]string, p.ttlKeys)
			phase := func(epoch int) error {
				s.rec.epoch.Store(int64(epoch))
				return pool(ctx, p.ttlKeys, p.workers, func(ctx context.Context, i int) error {
					okey, pkey := s.key("order", i), s.key("pay", i)
					orders := make([]string, 3)
					var wg sync.WaitGroup
					for j := range orders {
						wg.Go(func() { orders[j], _ = c.createOrder(ctx, okey, 1000+int64(i)) })
					}
					wg.Wait()
					order := orders[0]
					switch {
					case order == "":
						return nil // until recorded the give-up
					case epoch == 0:
						firstOrders[i] = order
					case order == firstOrders[i]:
						s.problem("key %s replayed order %s after it expired", okey, order)
					}
					payments := make([]result, 3)
					for j := range payments {
						wg.Go(func() { payments[j], _ = c.pay(ctx, firstOrders[i], pkey, "pm_card_visa") })
					}
					wg.Wait()
					want, code := http.StatusCreated, ""
					if epoch == 1 {
						want, code = http.StatusConflict, "order_already_paid"
					}
					for _, r := range payments {
						if r.status != 0 && (r.status != want || r.code != code) {
							s.problem("key %s, epoch %d: payment answered %d %s, want %d %s", pkey, epoch, r.status, r.code, want, code)
						}
					}
					return nil
				})
			}
			if err := phase(0); err != nil {
				return "", err
			}
			started := time.Now()
			if err := s.waitExpired(ctx, c, p.ttlKeys, 30*time.Second); err != nil {
				return "", err
			}
			waited := time.Since(started)
			if err := phase(1); err != nil {
				return "", err
			}
			return fmt.Sprintf("%d order keys and %d payment keys expired (TTL %s; waited %.1f s)",
				p.ttlKeys, p.ttlKeys, ttl, waited.Seconds()), nil
		},
	}
}

// waitExpired polls GET /v1/idempotency-keys/{key} until every key of the
// first phase is gone (404), within limit.
func (s *stage) waitExpired(ctx context.Context, c *caller, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for i := range n {
		for _, key := range []string{s.key("order", i), s.key("pay", i)} {
			for {
				status, err := c.get(ctx, "/v1/idempotency-keys/"+key)
				if err == nil && status == http.StatusNotFound {
					break
				}
				if time.Now().After(deadline) {
					if err != nil {
						return fmt.Errorf("key %s: no answer %s after the first phase: %w", key, limit, err)
					}
					return fmt.Errorf("key %s still there %s after the first phase (status %d)", key, limit, status)
				}
				if !sleepCtx(ctx, 100*time.Millisecond) {
					return ctx.Err()
				}
			}
		}
	}
	return nil
}

// get sends a GET to the next instance and returns the status.
func (c *caller) get(ctx context.Context, path string) (int, error) {
	target := c.targets[c.next.Add(1)%uint64(len(c.targets))]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
