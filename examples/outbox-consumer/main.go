// Command outbox-consumer is a small consumer of the API's outbox stream. It
// shows the other half of at-least-once delivery: the dispatcher may publish
// an event twice, and the consumer applies it once, keyed by its event id.
//
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/outbox-consumer
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemkeys/payments/internal/outbox"
	"github.com/idemkeys/payments/internal/redisconn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "outbox-consumer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	client, err := redisconn.Open(url, redisconn.Options{Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer client.Close()
	c := &outbox.Consumer{
		Client: client, Group: "example", Name: "consumer-1",
		Apply: func(_ context.Context, e outbox.Event) error {
			fmt.Printf("%s %s %s %s\n", e.ID, e.Type, e.MerchantID, e.Payload)
			return nil
		},
	}
	for ctx.Err() == nil {
		if _, skipped, err := c.Poll(ctx, 2*time.Second); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "poll:", err)
			time.Sleep(time.Second)
		} else if skipped > 0 {
			fmt.Fprintf(os.Stderr, "skipped %d duplicate event(s)\n", skipped)
		}
	}
	return nil
}
