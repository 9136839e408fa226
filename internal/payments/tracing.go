package payments

import "context"

// Tracer follows a payment or refund across the request that starts it and
// the work that settles it later (the reconciler, a webhook, the finisher of
// the client's record), which run in other traces: the request's trace
// context is stored with the payment, the refund and each outbox event, and
// the later work starts its spans linked to it. internal/tracing implements
// it over OpenTelemetry; payments itself depends on no tracing library, and
// a Service without a Tracer traces nothing.
type Tracer interface {
	// TraceParent returns the W3C traceparent of the span ctx carries, or
	// "" when there is none.
	TraceParent(ctx context.Context) string
	// Annotate sets key=value on the span ctx carries (the request's), so
	// that a trace viewer finds the request by the payment's id.
	Annotate(ctx context.Context, key, value string)
	// StartLinked starts a span called name with key=value, a child of
	// ctx's span, linked to the span traceparent names ("" links to
	// nothing). end ends it, marking it failed unless err is nil.
	StartLinked(ctx context.Context, name, traceparent, key, value string) (_ context.Context, end func(err error))
}

// The attributes that name what a span is about, and the names of the spans
// the service starts itself.
const (
	AttrPaymentID = "payment.id"
	AttrRefundID  = "refund.id"

	SpanReconcilePayment = "reconcile payment"
	SpanReconcileRefund  = "reconcile refund"
	SpanFinishPayment    = "finish payment record"
	SpanFinishRefund     = "finish refund record"
)

// WithTracer links the work on a payment or refund back to the request that
// started it (see Tracer).
func WithTracer(t Tracer) Option {
	return func(s *Service) { s.tracer = t }
}

// noTracer is the Tracer of a Service built without WithTracer.
type noTracer struct{}

func (noTracer) TraceParent(context.Context) string       { return "" }
func (noTracer) Annotate(context.Context, string, string) {}
func (noTracer) StartLinked(ctx context.Context, _, _, _, _ string) (context.Context, func(error)) {
	return ctx, func(error) {}
}
