// Package tracing turns OpenTelemetry traces on from the standard OTEL_*
// environment, for both binaries (cmd/api through internal/app, and
// cmd/provider), and holds the few helpers they share: the HTTP server and
// client instrumentation, a tracer provider for the database and Redis that
// only records inside a trace, the W3C traceparent that payments, refunds and
// outbox events store so later work can link back to the request that started
// it, and a log handler that writes the trace id on each line.
//
// Tracing is on when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT is set, and off otherwise or with
// OTEL_TRACES_EXPORTER=none. Spans go out over OTLP/HTTP with protobuf, in
// batches; Shutdown flushes what is left. The exporter is the SDK's
// otlptracehttp (export.go), which sends a span's invalid UTF-8 as U+FFFD
// rather than drop its batch; its other standard variables
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, the certificates)
// keep their meaning as the OTLP specification defines it, and the
// sampler's (OTEL_TRACES_SAMPLER), the batcher's (OTEL_BSP_*) and the
// resource's (OTEL_RESOURCE_ATTRIBUTES) as the SDK does.
//
// Off, a Tracing hands out no-op tracers and wraps nothing, so a program
// without an endpoint pays nothing for it.
//
// Nothing here is global: the program passes its Tracing to whatever
// instruments, and no OpenTelemetry global is read or set, except the SDK's
// error handler, which Start points at the program's logger so that a trace
// viewer that is down is a warning in the logs, not text on stderr.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The OTEL_* variables this package reads itself.
const (
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
)

// tracesPath is what OTLP/HTTP appends to OTEL_EXPORTER_OTLP_ENDPOINT for
// traces (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is).
const tracesPath = "/v1/traces"

// ScopeName names the tracer of this program's own spans (the reconciler's,
// the finisher's), beside the instrumentation libraries' own scopes.
const ScopeName = "github.com/idemkeys/payments"

// Settings are what the OTEL_* environment says about traces.
type Settings struct {
	// Endpoint is the URL spans are sent to, path included; empty means
	// tracing is off.
	Endpoint string
	// ServiceName, from OTEL_SERVICE_NAME, replaces the binary's own
	// service name when set.
	ServiceName string

	export exportSettings
}

// Enabled reports whether the settings turn tracing on.
func (s Settings) Enabled() bool { return s.Endpoint != "" }

// FromEnv reads the settings through getenv (os.Getenv, or a test's map).
// It returns an error naming the variable for a value it cannot honour: an
// exporter other than otlp or none, a protocol other than http/protobuf, an
// endpoint that is not an absolute http(s) URL or carries a query or a
// fragment (OTLP/HTTP sends to the URL's host and path alone), and, when
// tracing is on, the exporter's headers, timeout, compression or
// certificates (export.go) when they cannot be read.
func FromEnv(getenv func(string) string) (Settings, error) {
	var errs []error
	s := Settings{ServiceName: strings.TrimSpace(getenv(EnvServiceName))}
	exporter := strings.TrimSpace(getenv(EnvTracesExporter))
	switch exporter {
	case "", "otlp", "none":
	default:
		errs = append(errs, fmt.Errorf("%s must be otlp or none, got %q", EnvTracesExporter, exporter))
	}
	for _, name := range []string{EnvTracesProtocol, EnvProtocol} {
		if p := strings.TrimSpace(getenv(name)); p != "" && p != "http/protobuf" {
			errs = append(errs, fmt.Errorf("%s must be http/protobuf (the only OTLP protocol spoken here), got %q", name, p))
		}
	}
	endpoint, err := endpointFrom(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	off := endpoint == "" || exporter == "none" || strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true")
	var export exportSettings
	if !off {
		// The exporter's own variables (certificate files among them)
		// are read only when there is something to export.
		var exportErrs []error
		export, exportErrs = exportFromEnv(getenv)
		errs = append(errs, exportErrs...)
	}
	if len(errs) > 0 {
		return Settings{}, errors.Join(errs...)
	}
	if off {
		return s, nil
	}
	s.Endpoint, s.export = endpoint, export
	return s, nil
}

// endpointFrom is the traces URL: the signal's own endpoint as it is, or the
// general one with /v1/traces appended, as the OTLP specification says.
func endpointFrom(getenv func(string) string) (string, error) {
	name, raw := EnvTracesEndpoint, strings.TrimSpace(getenv(EnvTracesEndpoint))
	if raw == "" {
		name, raw = EnvEndpoint, strings.TrimSpace(getenv(EnvEndpoint))
	}
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s must be an absolute http(s) URL such as http://localhost:4318, got %q", name, redacted(raw))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		// The query may hold a token: the error shows the rest.
		u.RawQuery, u.Fragment, u.ForceQuery = "", "", false
		return "", fmt.Errorf("%s must have no query or fragment (OTLP/HTTP posts to the URL's host and path alone), got %q with one",
			name, u.Redacted())
	}
	if name == EnvEndpoint {
		u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
	}
	return u.String(), nil
}

// redacted is raw with a password it holds left out, for an error.
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}

// Tracing is the program's tracing: a recording tracer provider that exports
// when the settings turn it on, no-op tracers otherwise.
type Tracing struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
	children trace.TracerProvider
	shutdown func(context.Context) error
	enabled  bool
}

// propagator is the one wire format of trace context: W3C traceparent.
var propagator = propagation.TraceContext{}

// Off is a Tracing that records nothing.
func Off() *Tracing {
	return &Tracing{
		provider: noop.NewTracerProvider(), tracer: noop.Tracer{}, children: noop.NewTracerProvider(),
		shutdown: func(context.Context) error { return nil },
	}
}

// Start builds the program's Tracing for settings: Off when they do not
// turn it on, else an SDK tracer provider exporting over OTLP/HTTP in
// batches, with service.name set to service (unless OTEL_SERVICE_NAME says
// otherwise). Export failures are logged on log. Nothing is dialled
// here: a trace viewer that is down does not stop the program.
func Start(ctx context.Context, service string, settings Settings, log *slog.Logger) (*Tracing, error) {
	if !settings.Enabled() {
		return Off(), nil
	}
	exporter, err := newExporter(ctx, settings.Endpoint, settings.export)
	if err != nil {
		return nil, err
	}
	if settings.ServiceName != "" {
		service = settings.ServiceName
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: exporting spans failed; they are dropped", "error", err)
		}))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	t := New(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}

// New is a Tracing over a tracer provider built elsewhere: tests give one
// that records into memory (go.opentelemetry.io/otel/sdk/trace/tracetest).
// Its Shutdown does nothing; the caller owns tp.
func New(tp trace.TracerProvider) *Tracing {
	return &Tracing{
		provider: tp, tracer: tp.Tracer(ScopeName), children: childrenOnly{tp: tp}, enabled: true,
		shutdown: func(context.Context) error { return nil },
	}
}

// Enabled reports whether spans are recorded. Instrumentation that has a
// cost of its own (GORM callbacks, Redis hooks) is only installed then.
func (t *Tracing) Enabled() bool { return t.enabled }

// TracerProvider is the provider for instrumentation that starts traces
// (the HTTP server middleware, the provider's handler).
func (t *Tracing) TracerProvider() trace.TracerProvider { return t.provider }

// Propagator is the W3C trace context propagator every hop uses.
func (t *Tracing) Propagator() propagation.TextMapPropagator { return propagator }

// Children is a provider whose tracers record a span only inside a trace
// that is already under way (a request, a reconciliation), for the
// database and Redis. Their background polling (the outbox dispatcher,
// the reconciler's listing, the janitor, the Redis subscriber) would
// otherwise start a new one-span trace every few hundred milliseconds and
// bury the traces that matter.
func (t *Tracing) Children() trace.TracerProvider { return t.children }

// Shutdown flushes the spans not yet exported and stops the exporter; ctx
// bounds the wait.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flush on shutdown: %w", err)
	}
	return nil
}

// Handler wraps h with a server span per request that continues the
// caller's trace (its traceparent header), when tracing is on. The span is
// named by the method and the route pattern of an http.ServeMux.
func (t *Tracing) Handler(h http.Handler, operation string) http.Handler {
	if !t.enabled {
		return h
	}
	return otelhttp.NewHandler(h, operation,
		otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(propagator),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))
}

// Transport wraps base (nil: http.DefaultTransport) with a client span per
// request, which sends the trace context in traceparent, when tracing is
// on. The span is named by the method and the URL path, which for the
// provider's API names the call (the keys travel in the query or a header,
// never in the name).
func (t *Tracing) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if !t.enabled {
		return base
	}
	return otelhttp.NewTransport(base,
		otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(propagator),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return r.Method + " " + r.URL.Path
		}))
}
