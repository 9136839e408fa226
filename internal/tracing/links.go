package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// HeaderTraceParent is the W3C trace context header, and the name of the
// field or header that carries it beside an outbox event.
const HeaderTraceParent = "traceparent"

// TraceParent returns the W3C traceparent of the span ctx carries
// ("00-<trace id>-<span id>-<flags>"), or "" when it carries none. Payments,
// refunds and outbox events store it, so the work that settles or consumes
// them later can link back to the request that made them.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	var c traceParentCarrier
	propagator.Inject(ctx, &c)
	return c.traceparent
}

// traceParentCarrier keeps the traceparent that the propagator writes
// and nothing else: what a MapCarrier would, without a map per call.
type traceParentCarrier struct{ traceparent string }

func (c *traceParentCarrier) Get(string) string { return "" }
func (c *traceParentCarrier) Keys() []string    { return nil }
func (c *traceParentCarrier) Set(key, value string) {
	if key == HeaderTraceParent {
		c.traceparent = value
	}
}

// SpanContext parses a stored traceparent; an empty or malformed one gives
// an invalid SpanContext.
func SpanContext(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier{HeaderTraceParent: traceparent})
	return trace.SpanContextFromContext(ctx)
}

// TraceParent is the package function, as a method, for the ports that
// take a Tracing (payments.Tracer).
func (t *Tracing) TraceParent(ctx context.Context) string {
	if !t.enabled {
		return ""
	}
	return TraceParent(ctx)
}

// Annotate sets key=value on the span ctx carries, if it records.
func (t *Tracing) Annotate(ctx context.Context, key, value string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String(key, value))
	}
}

// StartLinked starts a span called name with key=value, a child of the
// span ctx carries (a new trace when none), linked to the span traceparent
// names: how the reconciler's and the finisher's work, which happens long
// after the request that started a payment and in another trace, points
// back at that request. end ends the span, marking it failed with err
// unless err is nil.
func (t *Tracing) StartLinked(ctx context.Context, name, traceparent, key, value string) (_ context.Context, end func(err error)) {
	if !t.enabled {
		return ctx, func(error) {}
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(attribute.String(key, value))}
	if sc := SpanContext(traceparent); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	ctx, span := t.tracer.Start(ctx, name, opts...)
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// childrenOnly is a TracerProvider whose tracers start a span only when the
// context already carries one (see Tracing.Children).
type childrenOnly struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (c childrenOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{inner: c.tp.Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	inner trace.Tracer
}

func (c childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		// The span ctx has, a no-op one or one the sampler left out
		// (whose children it leaves out too): nothing is recorded, and
		// the instrumentation ends it as it would a real one.
		return ctx, trace.SpanFromContext(ctx)
	}
	return c.inner.Start(ctx, name, opts...)
}
