// Command baselineapi is the API that tools/bench measures beside the real
// one: the very same program, whose order routes swap their idempotency
// middleware for another design, chosen by BENCH_ORDERS_MODE:
//
//	none     (default) no idempotency at all: the order and its outbox
//	         event, without a record
//	guarded  the common design: reserve the key in a statement of its own,
//	         run the order's transaction, then store the answer in a third
//	         write (the Guarded middleware the payment routes use)
//
// Never serve traffic with it. It lives under tools/ so that cmd/ holds only
// what is deployed.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "baselineapi:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load(os.Environ())
	if err != nil {
		return err
	}
	log := app.NewLogger(os.Stdout, cfg.LogLevel)
	app.TuneGC(os.Environ()) // as cmd/api serves
	return app.Run(ctx, cfg, log, app.WithOrdersMiddleware(ordersMiddleware(os.Getenv("BENCH_ORDERS_MODE"), log)))
}

// ordersMiddleware is what the order routes run in place of the Atomic
// middleware.
func ordersMiddleware(mode string, log *slog.Logger) func(*ginidem.Middleware) func(ginidem.Handler) gin.HandlerFunc {
	return func(idem *ginidem.Middleware) func(ginidem.Handler) gin.HandlerFunc {
		if mode == "guarded" {
			log.Warn("benchmark baseline build: POST /v1/orders reserves and completes its key around the order's transaction")
			return func(h ginidem.Handler) gin.HandlerFunc {
				return idem.Guarded(func(c *gin.Context, _ *idempotency.Op) (idempotency.Answer, error) { return h(c) })
			}
		}
		log.Warn("benchmark baseline build: POST /v1/orders runs WITHOUT idempotency")
		return handlers.Serve
	}
}
