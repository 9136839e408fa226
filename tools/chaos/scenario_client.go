package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/idemkeys/payments/client"
)

// dropRate is the share of answers the network loses in the client
// scenario, after the API has answered in full.
const dropRate = 0.25

// clientScenario: customers pay through the repository's own Go client
// (client/), which keeps one key per operation across its retries. Between
// the clients and the instances a balancer drops 25% of the answers after
// the API has sent them whole, and the provider loses 10% of its answers
// and has 10% outages. Every answer the balancer delivered is recorded.
func clientScenario(p profile) scenario {
	return scenario{
		name: "client",
		about: fmt.Sprintf("%d orders paid by %d concurrent clients of the repository's client package through a balancer "+
			"that drops %.0f%% of the API's answers after they were sent in full, with a provider that loses 10%% of "+
			"its answers and has 10%% outages.", p.clientOps, p.workers, dropRate*100),
		setup: clusterConfig{lostRate: 0.10, unavailableRate: 0.10, latency: 20 * time.Millisecond},
		run: func(ctx context.Context, s *stage) (string, error) {
			lb, err := startBalancer(s.c.apiAddrs(), dropRate, s.c.sys.seed, s.rec)
			if err != nil {
				return "", err
			}
			defer lb.close()
			var calls atomic.Int64
			cl := client.New(lb.url, apiKey,
				client.WithMaxAttempts(10),
				client.WithBackoff(20*time.Millisecond, 500*time.Millisecond),
				client.WithAttemptTimeout(10*time.Second),
				client.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}),
				client.WithOnAttempt(func(a client.Attempt) {
					s.rec.took(a.Elapsed)
					if a.Status == 0 {
						s.rec.noAnswer()
					} else if !expectedStatus(a.Status, a.Code) {
						s.problem("unexpected answer %d %s to %s %s (key %s)", a.Status, a.Code, a.Method, a.Path, a.IdempotencyKey)
					}
				}),
			)
			err = pool(ctx, p.clientOps, p.workers, func(ctx context.Context, i int) error {
				s.clientOrderAndPay(s.rec.traced(ctx), cl, i, &calls)
				return nil
			})
			if err != nil {
				return "", err
			}
			retries := s.rec.requestCount() - calls.Load()
			return fmt.Sprintf("%d answers dropped by the network (the client sent %d retries); "+
				"%.0f charge calls with a lost answer, %.0f not executed", lb.dropped.Load(), retries,
				s.c.metric(ctx, "payment_provider_calls_total", `op="charge"`, `outcome="unknown"`),
				s.c.metric(ctx, "payment_provider_calls_total", `op="charge"`, `outcome="not_executed"`)), nil
		},
	}
}

// clientOrderAndPay is one customer of the client package: the keys are made
// when the operation is decided and passed on every call, so a call that
// runs out of attempts can be made again as the same operation.
// calls counts the client's calls, each the first attempt of its own.
func (s *stage) clientOrderAndPay(ctx context.Context, cl *client.Client, i int, calls *atomic.Int64) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	okey, pkey := s.key("order", i), s.key("pay", i)
	params := client.CreateOrderParams{
		CustomerID: "cus_chaos", Currency: "BRL",
		Items:    []client.OrderItem{{SKU: "SKU-1", Name: "Coffee", Quantity: 1, UnitAmount: 1000 + int64(i)}},
		Metadata: map[string]string{"chaos_key": okey},
	}
	var order *client.Order
	for order == nil {
		calls.Add(1)
		o, err := cl.CreateOrder(ctx, params, client.WithIdempotencyKey(okey))
		switch {
		case err == nil:
			order = o
		case ctx.Err() != nil:
			s.problem("client order under key %s gave up: %v", okey, err)
			return
		case !retryAgain(err):
			s.problem("client order under key %s: %v", okey, err)
			return
		}
	}
	method := s.method()
	for {
		calls.Add(1)
		_, err := cl.PayOrder(ctx, order.ID, client.PayParams{PaymentMethod: method}, client.WithIdempotencyKey(pkey))
		switch {
		case err == nil, errors.Is(err, client.ErrPaymentDeclined):
			return
		case ctx.Err() != nil:
			s.problem("client payment under key %s gave up: %v", pkey, err)
			return
		case !retryAgain(err):
			s.problem("client payment under key %s: %v", pkey, err)
			return
		}
	}
}

// retryAgain says whether a call that failed may be made again under its
// key: it ran out of attempts on answers that were not final.
func retryAgain(err error) bool {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Retryable()
	}
	return true // a network error or ErrStillProcessing
}
