//go:build benchbaseline

package main

import (
	"log/slog"
	"os"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/idempotency"
)

// ordersGuard, in tools/bench's baseline build only, swaps the order routes'
// middleware so that the very same program can be measured with other
// designs, chosen by BENCH_ORDERS_MODE:
//
//	none     (default) no idempotency at all: the order and its outbox
//	         event, without a record
//	guarded  the common design: reserve the key in a statement of its own,
//	         run the order's transaction, then store the answer in a third
//	         write (the Guarded middleware the payment routes use)
//
// Never serve traffic from this build.
func ordersGuard(keeper *idempotency.Keeper, log *slog.Logger) gin.HandlerFunc {
	if os.Getenv("BENCH_ORDERS_MODE") == "guarded" {
		log.Warn("benchmark baseline build: POST /v1/orders reserves and completes its key around the order's transaction")
		return keeper.Guarded()
	}
	log.Warn("benchmark baseline build: POST /v1/orders runs WITHOUT idempotency")
	return func(c *gin.Context) { c.Next() }
}
