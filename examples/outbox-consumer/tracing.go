package main

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing, when the standard OTEL_* variables ask for it: each event is
// handled in a consumer span that continues the trace of the transaction
// that wrote it, whose W3C traceparent the API sends beside the event (the
// stream entry's traceparent field, the message's traceparent header). A
// trace viewer then shows the consumer's work in the trace of the request
// that caused the event. As for the API: on with
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, off
// otherwise or with OTEL_TRACES_EXPORTER=none; OTLP over HTTP with
// protobuf, whose other variables the exporter reads itself.

// serviceName is the consumer's service.name (OTEL_SERVICE_NAME replaces it).
const serviceName = "outbox-consumer"

// startTracing returns the tracer the handler uses and what flushes it at
// exit; a no-op tracer when tracing is off.
func startTracing(ctx context.Context, getenv func(string) string) (trace.Tracer, func(context.Context) error, error) {
	off := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == ""
	if off || strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) == "none" {
		return noop.Tracer{}, func(context.Context) error { return nil }, nil
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", serviceName)), resource.WithFromEnv())
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return tp.Tracer("outbox-consumer"), tp.Shutdown, nil
}

// startSpan starts the span of one delivery, continuing the trace that
// traceparent names (a new one when it is empty or malformed).
func startSpan(ctx context.Context, tracer trace.Tracer, d delivery) (context.Context, func(err error)) {
	parent := propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{headerTraceParent: d.traceParent})
	ctx, span := tracer.Start(parent, "outbox consume "+d.Type, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("event.id", d.ID), attribute.String("event.type", d.Type), attribute.String("merchant.id", d.MerchantID)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
