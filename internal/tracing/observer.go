package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkeys/payments/internal/idempotency"
)

// AttrIdempotencyOutcome is the request span's attribute that says what the
// idempotency layer did (executed, replayed, recovered, mismatch,
// in_progress, ...: string).
const AttrIdempotencyOutcome = "idempotency.outcome"

// Observer returns an idempotency.Observer that puts each request's outcome
// on its span and then tells next (the metrics). The idempotency core knows
// nothing of tracing; this is how its decision reaches the trace.
func Observer(next idempotency.Observer) idempotency.Observer { return observer{next} }

type observer struct{ next idempotency.Observer }

func (o observer) Outcome(ctx context.Context, route string, out string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String(AttrIdempotencyOutcome, out))
	}
	o.next.Outcome(ctx, route, out)
}

func (o observer) Waited(ctx context.Context, route string, d time.Duration) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("idempotency: waited for the original", trace.WithAttributes(attribute.Int64("idempotency.waited_ms", d.Milliseconds())))
	}
	o.next.Waited(ctx, route, d)
}

func (o observer) Processed(ctx context.Context, route string, d time.Duration) {
	o.next.Processed(ctx, route, d)
}
