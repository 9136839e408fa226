// Command client creates an order and pays it through the retrying client
// package, against a running API, and prints every attempt on the way. Each
// operation is decided once and keeps its key across all of its attempts.
//
//	go run ./cmd/api &                      # in-process mock provider
//	go run ./examples/client                # pm_card_visa
//	go run ./examples/client pm_card_declined
//	go run ./examples/client pm_fault_unavailable
//
// API_URL (default http://127.0.0.1:8080) and API_KEY (default sk_test_acme)
// say which API and merchant. The first argument is the payment method.
//
// With pm_fault_unavailable the API answers 502 and the client tries again
// under the same key. To see a 202 (the provider's outcome unknown) and the
// client asking again until the final answer, run the provider on its own
// without webhooks, which would otherwise settle the payment before the API
// gives up on the provider:
//
//	HTTP_ADDR=:8081 go run ./cmd/provider &
//	PROVIDER_URL=http://127.0.0.1:8081 PROVIDER_TIMEOUT=500ms go run ./cmd/api &
//	go run ./examples/client pm_fault_lost_response
//
// which prints something like:
//
//	attempt 1  POST /v1/orders/ord_…/payments  key G3TCP7QX…  → 202  in 505ms; next attempt in 9ms, same key
//	attempt 2  POST /v1/orders/ord_…/payments  key G3TCP7QX…  → 201  in 3ms
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemkeys/payments/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	method := "pm_card_visa"
	if len(args) > 0 {
		method = args[0]
	}
	c := client.New(getenv("API_URL", "http://127.0.0.1:8080"), getenv("API_KEY", "sk_test_acme"),
		client.WithMaxAttempts(10),
		client.WithOnAttempt(printAttempt),
	)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	// Each operation's key is made here, when the operation is decided, not
	// per request. A real checkout would store it with the cart, so that a
	// crash and a rerun continue the same operation instead of paying twice.
	orderKey := client.NewIdempotencyKey()
	order, err := c.CreateOrder(ctx, client.CreateOrderParams{
		CustomerID: "cus_example",
		Currency:   "BRL",
		Items:      []client.OrderItem{{SKU: "SKU-1", Name: "Coffee", Quantity: 2, UnitAmount: 1250}},
	}, client.WithIdempotencyKey(orderKey))
	if err != nil {
		return fmt.Errorf("create order: %w", err)
	}
	fmt.Printf("order %s: %s, %d %s (attempts %d, replayed %t)\n\n",
		order.ID, order.Status, order.AmountTotal, order.Currency, order.Attempts, order.Replayed)

	payKey := client.NewIdempotencyKey()
	payment, err := c.PayOrder(ctx, order.ID, client.PayParams{PaymentMethod: method}, client.WithIdempotencyKey(payKey))
	var apiErr *client.APIError
	switch {
	case err == nil:
		fmt.Printf("payment %s: %s, charge %s (attempts %d, replayed %t)\n",
			payment.ID, payment.Status, payment.ProviderChargeID, payment.Attempts, payment.Replayed)
	case errors.Is(err, client.ErrPaymentDeclined) && errors.As(err, &apiErr):
		// Final: retrying this key would only replay the decline. Another
		// attempt to pay is another operation, with a new key.
		fmt.Printf("payment %s declined: %s\n", apiErr.PaymentID, apiErr.DeclineCode)
	case errors.Is(err, client.ErrStillProcessing):
		// Not lost: the server settles it. Keep payKey to ask again later.
		fmt.Printf("payment %s still processing after %d attempts; ask again with the same key, or GET /v1/payments/%s\n",
			payment.ID, payment.Attempts, payment.ID)
	default:
		// Unknown: maybe charged. Only the same key may be retried.
		return fmt.Errorf("pay order %s (retry with the same key, %s): %w", order.ID, shortKey(payKey), err)
	}
	return nil
}

// printAttempt prints one attempt. It shows only the start of the key: a
// whole idempotency key does not belong in logs.
func printAttempt(a client.Attempt) {
	fmt.Printf("  attempt %d  %s %s  key %s  ", a.Number, a.Method, a.Path, shortKey(a.IdempotencyKey))
	switch {
	case a.Status != 0:
		fmt.Printf("→ %d", a.Status)
		if a.Code != "" {
			fmt.Printf(" %s", a.Code)
		}
		if a.Replayed {
			fmt.Print(" (replayed)")
		}
	default:
		fmt.Printf("→ no answer: %v", a.Err)
	}
	fmt.Printf("  in %s", a.Elapsed.Round(time.Millisecond))
	if a.Retry {
		fmt.Printf("; next attempt in %s, same key", a.Wait.Round(time.Millisecond))
	}
	fmt.Println()
}

func shortKey(k string) string {
	if len(k) <= 8 {
		return k
	}
	return k[:8] + "…"
}

func getenv(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
