// Package ginidem is the Gin adapter of the idempotency layer: it turns a
// Gin request into an idempotency.Input, runs the route's handler as the
// idempotency.Handler, and writes the answer. Everything the layer decides
// is in the core package; this one only translates.
//
// A keyed handler returns its answer as a value, or an error, which the
// application's error table (Options.Answer) turns into one:
//
//	idem := ginidem.New(keeper, ginidem.Options{Scope: merchantOf, Answer: errorAnswer})
//	r.POST("/v1/orders", idem.Atomic(createOrder))
//	r.POST("/v1/orders/:id/payments", idem.Guarded(payOrder))
package ginidem

import (
	"bytes"
	"context"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/idempotency"
)

// HeaderReplayed is the response header that marks a replayed answer: the
// core tells the adapter that an answer was stored, the adapter says so in
// HTTP.
const HeaderReplayed = "Idempotent-Replayed"

// Handler runs a route's work and returns its answer, or an error for the
// application's error table. On an Atomic route its request context
// carries the transaction its rows join.
type Handler func(c *gin.Context) (idempotency.Answer, error)

// GuardedHandler is the handler of a Guarded route: it also gets op, the
// operation that owns the key's record, to pass to its outside call
// (idempotency.Effect.Run).
type GuardedHandler func(c *gin.Context, op *idempotency.Op) (idempotency.Answer, error)

// Options are what the adapter needs from the application.
type Options struct {
	// Scope returns who a request's key belongs to (the authenticated
	// merchant). Required.
	Scope func(c *gin.Context) string
	// Answer turns an error into its answer, final or not: the
	// application's error table. It answers both a handler's errors and the
	// layer's own refusals (a missing key, a key reused, a duplicate in
	// progress). Required.
	Answer func(c *gin.Context, err error) idempotency.Answer
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
	case opts.Answer == nil:
		panic("ginidem: Options.Answer is required")
	}
	return &Middleware{keeper: keeper, opts: opts}
}

// Atomic serves h as a route whose whole effect is rows in the database
// (creating an order). h runs inside a transaction that begins at its first
// statement and that the record commits with (see Keeper.Atomic). Its
// contract: no effect outside the transaction, and a statement that fails is
// answered with an error, never with a success; a final error answer is
// stored after the transaction rolled back.
func (m *Middleware) Atomic(h Handler) gin.HandlerFunc {
	g := func(c *gin.Context, _ *idempotency.Op) (idempotency.Answer, error) { return h(c) }
	return m.serve(func(c *gin.Context, in idempotency.Input) (idempotency.Answer, bool, error) {
		return m.keeper.Atomic(c.Request.Context(), in, func(ctx context.Context, body []byte) idempotency.Answer {
			return m.run(c, g, ctx, nil, body)
		})
	})
}

// Guarded serves h as a route with an effect outside the database (a charge
// at a payment provider). The key is reserved first; h runs as the owner of
// the key's record, which it is given (op) to pass to its outside call.
func (m *Middleware) Guarded(h GuardedHandler) gin.HandlerFunc {
	return m.serve(func(c *gin.Context, in idempotency.Input) (idempotency.Answer, bool, error) {
		return m.keeper.Guarded(c.Request.Context(), in, func(ctx context.Context, op *idempotency.Op, body []byte) idempotency.Answer {
			return m.run(c, h, ctx, op, body)
		})
	})
}

// serve reads the request as the Keeper's Input, hands it to handle (the
// Keeper's Atomic or Guarded) and writes what comes back.
func (m *Middleware) serve(handle func(c *gin.Context, in idempotency.Input) (idempotency.Answer, bool, error)) gin.HandlerFunc {
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
		answer, replayed, err := handle(c, in)
		switch {
		case err != nil:
			answer = m.opts.Answer(c, err)
		case replayed:
			c.Header(HeaderReplayed, "true")
		}
		Write(c, answer)
		c.Abort()
	}
}

// run calls h with ctx and the body as the Keeper read it. The request's own
// context comes back afterwards whatever happens: a panic is answered by a
// recovery middleware further out, which must see the request as it came.
func (m *Middleware) run(c *gin.Context, h GuardedHandler, ctx context.Context, op *idempotency.Op, body []byte) idempotency.Answer {
	orig := c.Request
	defer func() { c.Request = orig }()
	c.Request = c.Request.WithContext(ctx)
	c.Request.Body = newReadBody(body)
	a, err := h(c, op)
	if err != nil {
		return m.opts.Answer(c, err)
	}
	return a
}

// readBody is the body the Keeper read, as the handler reads it again: an
// io.ReadCloser, whose Bytes are what is left to read, for a decoder that
// wants the body whole without copying it.
type readBody struct {
	bytes.Reader
	b []byte
}

func newReadBody(b []byte) *readBody {
	r := &readBody{b: b}
	r.Reset(b)
	return r
}

// Bytes returns the body's unread part, without reading it.
func (r *readBody) Bytes() []byte { return r.b[len(r.b)-r.Len():] }

func (r *readBody) Close() error { return nil }

// Write sends an answer: its headers, status and body. It is the one
// writer of answers, keyed or not, stored or fresh.
func Write(c *gin.Context, a idempotency.Answer) {
	h := c.Writer.Header()
	for name, values := range a.Header {
		h[name] = values
	}
	c.Status(a.Status)
	_, _ = c.Writer.Write(a.Body)
}

func params(c *gin.Context) map[string]string {
	if len(c.Params) == 0 {
		return nil // a route without parameters (POST /v1/orders): no map to make
	}
	out := make(map[string]string, len(c.Params))
	for _, p := range c.Params {
		out[p.Key] = p.Value
	}
	return out
}
