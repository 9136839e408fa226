//go:build !benchbaseline

package main

import (
	"log/slog"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/idempotency"
)

// ordersGuard is the middleware of the order routes: the Atomic one, whose
// record commits with the order. Only tools/bench's baseline build (-tags
// benchbaseline, baseline_on.go) can swap it; a binary built without that
// tag, every binary that serves traffic, cannot.
func ordersGuard(keeper *idempotency.Keeper, _ *slog.Logger) gin.HandlerFunc {
	return keeper.Atomic()
}
