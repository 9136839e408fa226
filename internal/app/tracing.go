package app

import (
	"context"
	"fmt"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkeys/payments/internal/tracing"
)

// ServiceName is the API's service.name in traces (OTEL_SERVICE_NAME
// replaces it).
const ServiceName = "payments-api"

// startTracing is the program's tracing: the one WithTracing gave, or the
// one the OTEL_* settings ask for. Its Shutdown, which flushes the last
// spans, is the first closer, so it runs after every other.
func (a *App) startTracing(ctx context.Context, o options) error {
	tr := o.tracing
	if tr == nil {
		var err error
		if tr, err = tracing.Start(ctx, ServiceName, a.cfg.Tracing, a.log.With("component", "tracing")); err != nil {
			return err
		}
		if tr.Enabled() {
			a.log.InfoContext(ctx, "tracing: exporting spans over OTLP/HTTP", "endpoint", a.cfg.Tracing.Endpoint)
		}
	}
	a.tracing = tr
	a.closers = append(a.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownFlushTimeout)
		defer cancel()
		return tr.Shutdown(ctx)
	})
	return nil
}

// databaseTracing is what database.Options.Tracing gets: a span per
// statement, inside traces only, with the SQL but never its values (those
// are keys, amounts, emails and bodies); nil when tracing is off, so that
// nothing is installed.
func databaseTracing(tr *tracing.Tracing) trace.TracerProvider {
	if tr == nil || !tr.Enabled() {
		return nil
	}
	return tr.Children()
}

// traceRedis adds a span per command to client, inside traces only,
// without the command's arguments: the cache's keys hold idempotency keys
// and its values stored answers.
func traceRedis(client redis.UniversalClient, tr *tracing.Tracing) error {
	if !tr.Enabled() {
		return nil
	}
	err := redisotel.InstrumentTracing(client, redisotel.WithTracerProvider(tr.Children()),
		redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false), redisotel.WithDialFilter(true))
	if err != nil {
		return fmt.Errorf("tracing: instrument redis: %w", err)
	}
	return nil
}

// traceRequests is the router's tracing middleware (handlers.Deps.Tracing):
// a server span per request, named by the route template, continuing the
// caller's traceparent; nil when tracing is off. Probes and scrapes are
// left out: they would be most of the traces and say nothing.
func traceRequests(tr *tracing.Tracing) gin.HandlerFunc {
	if !tr.Enabled() {
		return nil
	}
	return otelgin.Middleware("",
		otelgin.WithTracerProvider(tr.TracerProvider()), otelgin.WithPropagators(tr.Propagator()),
		otelgin.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgin.WithGinFilter(func(c *gin.Context) bool {
			switch c.FullPath() {
			case "/healthz", "/readyz", "/metrics", "/swagger/*any":
				return false
			}
			return true
		}))
}
