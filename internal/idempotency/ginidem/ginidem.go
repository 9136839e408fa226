// Package ginidem is the Gin adapter of the idempotency layer: middleware
// that turns a Gin request into an idempotency.Input, runs the rest of the
// chain as the idempotency.Handler, and writes the Result. Everything the
// layer decides is in the core package; this one only translates.
//
//	idem := ginidem.New(keeper, ginidem.Options{Scope: merchantOf, Render: renderError})
//	r.POST("/v1/orders", idem.Atomic(), createOrder)
//	r.POST("/v1/orders/:id/payments", idem.Guarded(), payOrder)
package ginidem

import (
	"bytes"
	"context"
	"io"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/idempotency"
)

// Options are what the adapter needs from the application.
type Options struct {
	// Scope returns who a request's key belongs to (the authenticated
	// merchant). Required.
	Scope func(c *gin.Context) string
	// Render answers an error of a Result (one of the core's errors, or a
	// store's) and aborts the chain: the application's error table.
	// Required.
	Render func(c *gin.Context, err error)
}

// Middleware makes Gin routes idempotent.
type Middleware struct {
	keeper *idempotency.Keeper
	opts   Options
}

// New returns the middleware over keeper. It panics when an option is
// missing: a wiring mistake should stop the process at start.
func New(keeper *idempotency.Keeper, opts Options) *Middleware {
	switch {
	case keeper == nil:
		panic("ginidem: a Keeper is required")
	case opts.Scope == nil:
		panic("ginidem: Options.Scope is required")
	case opts.Render == nil:
		panic("ginidem: Options.Render is required")
	}
	return &Middleware{keeper: keeper, opts: opts}
}

// Atomic is the middleware of routes whose whole effect is rows in the
// database (creating an order). The handlers after it run inside a
// transaction that begins at their first statement and that the record
// commits with (see idempotency.Atomic). Their contract: no effect outside
// the transaction, and a statement that fails is answered with an error,
// never with a success; an error answer that is kept is stored after the
// transaction rolled back.
func (m *Middleware) Atomic() gin.HandlerFunc {
	if m.keeper.Config().Transactor == nil {
		panic("ginidem: Atomic routes need idempotency.Config.Transactor")
	}
	return m.serve(idempotency.Atomic)
}

// Guarded is the middleware of routes with an effect outside the database
// (a charge at a payment provider). The key is reserved first; the
// handlers after it find an idempotency.Lease in the request context
// (idempotency.LeaseFrom) to record recovery points with.
func (m *Middleware) Guarded() gin.HandlerFunc {
	return m.serve(idempotency.Guarded)
}

func (m *Middleware) serve(mode idempotency.Mode) gin.HandlerFunc {
	return func(c *gin.Context) {
		in := idempotency.Input{
			Scope:  m.opts.Scope(c),
			Keys:   c.Request.Header.Values(idempotency.HeaderKey),
			Method: c.Request.Method,
			Path:   c.Request.URL.Path,
			Route:  c.FullPath(),
			Params: params(c),
			Body:   c.Request.Body,
		}
		cw := newCaptureWriter(c.Writer)
		res := m.keeper.Handle(c.Request.Context(), mode, in, func(ctx context.Context, body []byte) idempotency.Response {
			return runChain(c, cw, ctx, body)
		})
		m.write(c, cw, res)
	}
}

// runChain runs the rest of the chain with ctx and the body put back,
// holding its answer in cw. The real writer and the request's own context
// come back afterwards whatever happens: a panic is answered by a recovery
// middleware further out, which must write to the real writer.
func runChain(c *gin.Context, cw *captureWriter, ctx context.Context, body []byte) idempotency.Response {
	orig, base := c.Writer, c.Request.Context()
	defer func() {
		c.Writer = orig
		c.Request = c.Request.WithContext(base)
	}()
	c.Writer = cw
	c.Request = c.Request.WithContext(ctx)
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	c.Next()
	return cw.response()
}

// write is the one exit of a keyed request: the error's problem, the
// stored answer marked as a replay, or the handler's own answer.
func (m *Middleware) write(c *gin.Context, cw *captureWriter, res idempotency.Result) {
	switch {
	case res.Err != nil:
		m.opts.Render(c, res.Err)
	case res.Replayed:
		replay(c, res.Response)
	default:
		cw.flush()
	}
	c.Abort()
}

// replay writes a stored answer, marked as replayed.
func replay(c *gin.Context, resp *idempotency.Response) {
	h := c.Writer.Header()
	if resp.ContentType != "" {
		h.Set("Content-Type", resp.ContentType)
	}
	if resp.Location != "" {
		h.Set("Location", resp.Location)
	}
	h.Set(idempotency.HeaderReplayed, "true")
	c.Status(resp.Status)
	_, _ = c.Writer.Write(resp.Body)
}

func params(c *gin.Context) []idempotency.Param {
	out := make([]idempotency.Param, len(c.Params))
	for i, p := range c.Params {
		out[i] = idempotency.Param{Name: p.Key, Value: p.Value}
	}
	return out
}
