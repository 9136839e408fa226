package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
)

// stormScenario: a retry storm. stormRequests clients send the same order
// under one key at once, spread over the three instances, each retrying
// until it has a final answer; then as many pay that order under one
// payment key. One order, one charge, one answer per key.
func stormScenario(p profile) scenario {
	return scenario{
		name: "storm",
		about: fmt.Sprintf("%d concurrent requests on one order key, then %d on one payment key for that order, "+
			"spread over 3 instances, each client retrying until a final answer.", p.stormRequests, p.stormRequests),
		setup: clusterConfig{latency: 0},
		run: func(ctx context.Context, s *stage) (string, error) {
			c := directCaller(s)
			orderKey := s.key("order", 0)
			results := storm(ctx, s, c, p.stormRequests, "/v1/orders", orderKey, orderBody(orderKey, 2500))
			orderID := ""
			for _, r := range results {
				if r.status == http.StatusCreated {
					orderID = r.id
					break
				}
			}
			if orderID == "" {
				return "", fmt.Errorf("no client got the order created")
			}
			payKey := s.key("pay", 0)
			storm(ctx, s, c, p.stormRequests, "/v1/orders/"+orderID+"/payments", payKey, payBody("pm_card_visa"))
			return fmt.Sprintf("2 keys × %d concurrent clients", p.stormRequests), nil
		},
	}
}

// storm starts n clients at once on one key and waits for their final
// answers.
func storm(ctx context.Context, s *stage, c *caller, n int, path, key string, body []byte) []result {
	results := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			r, err := c.until(ctx, path, key, body)
			if err == nil {
				results[i] = r
			}
		})
	}
	close(start)
	wg.Wait()
	return results
}
