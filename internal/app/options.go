package app

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/tracing"
)

// An Option changes how New wires the program. The program as deployed
// (cmd/api) uses none.
type Option func(*options)

type options struct {
	orders  func(*ginidem.Middleware) func(ginidem.Handler) gin.HandlerFunc
	tracing *tracing.Tracing
	wrap    func(http.Handler) http.Handler
}

// WithHandlerWrapper puts wrap around the program's whole HTTP handler, so
// that it sees every request and answer (the tests' check of every answer
// against the OpenAPI document).
func WithHandlerWrapper(wrap func(http.Handler) http.Handler) Option {
	return func(o *options) { o.wrap = wrap }
}

// WithTracing replaces the tracing that the OTEL_* settings would start by
// t, whose owner shuts it down (tests record spans in memory with it).
func WithTracing(t *tracing.Tracing) Option {
	return func(o *options) { o.tracing = t }
}

// WithOrdersMiddleware replaces the idempotency layer of the Atomic routes
// (orders, items, customers), whose record commits with the order, by what
// orders returns for the program's idempotency middleware. Only the benchmark's baseline API
// (tools/bench/baselineapi) uses it, to measure the very same program
// without idempotency or with another design; a program built with it must
// never serve traffic.
func WithOrdersMiddleware(orders func(*ginidem.Middleware) func(ginidem.Handler) gin.HandlerFunc) Option {
	return func(o *options) { o.orders = orders }
}

// ordersMiddleware is the middleware of the order routes: the Atomic one,
// unless WithOrdersMiddleware replaced it.
func (o options) ordersMiddleware(idem *ginidem.Middleware) func(ginidem.Handler) gin.HandlerFunc {
	if o.orders != nil {
		return o.orders(idem)
	}
	return idem.Atomic
}
