package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// TestHandleContinuesTheEventsTrace: an event that arrives with the
// traceparent of the transaction that wrote it is handled in a consumer
// span of that trace, a child of that span; one without starts a trace.
func TestHandleContinuesTheEventsTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := trace.NewTracerProvider(trace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	_, db := consumerDB(t, "sqlite")
	h := &handler{store: &Store{db: db}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tracer: tp.Tracer("test")}

	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	acked := 0
	ack := func(context.Context) error { acked++; return nil }
	pay := Event{ID: "evt_t1", Type: eventPaymentSucceeded, MerchantID: "mer_a", Payload: []byte(`{"id":"pay_1","amount":100,"currency":"BRL"}`)}
	require.NoError(t, h.handle(context.Background(), delivery{Event: pay, ack: ack, traceParent: "00-" + traceID + "-" + spanID + "-01"}))
	other := Event{ID: "evt_t2", Type: "order.created", MerchantID: "mer_a", Payload: []byte(`{}`)}
	require.NoError(t, h.handle(context.Background(), delivery{Event: other, ack: ack}))
	require.Equal(t, 2, acked)

	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	continued, fresh := spans[0], spans[1]
	require.Equal(t, "outbox consume payment.succeeded", continued.Name)
	require.Equal(t, oteltrace.SpanKindConsumer, continued.SpanKind)
	require.Equal(t, traceID, continued.SpanContext.TraceID().String())
	require.Equal(t, spanID, continued.Parent.SpanID().String())
	require.NotEqual(t, traceID, fresh.SpanContext.TraceID().String())
	require.False(t, fresh.Parent.IsValid())
}
