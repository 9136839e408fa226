package handlers

import (
	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/idempotency/ginidem"
)

// Every handler returns its answer as a value (answers.JSON for a success),
// or an error that the error table (errors.go) turns into one; ginidem.Write is the one place that
// writes either. A keyed route's answer goes through the idempotency layer,
// which stores it when it is final; any other route's through Serve.

// Serve is a route without an Idempotency-Key: h's answer, or its error's,
// written as it is.
func Serve(h ginidem.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		a, err := h(c)
		if err != nil {
			RenderError(c, err)
			return
		}
		ginidem.Write(c, a)
	}
}
