package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
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
// a server span per request, named by the method and the route template
// ("POST /v1/orders", or the method alone when no route matched),
// continuing the caller's traceparent; nil when tracing is off. Probes and
// scrapes are left out: they would be most of the traces and say nothing.
//
// It is written here rather than taken from otelgin, whose span is the
// same but which also records the HTTP server metrics on every request
// (work for a meter the API does not export), sets the route twice and
// stores its tracer in the gin context: 6 allocations and 1.7 KB per
// traced create (BenchmarkHandler/postgres/traced), and a module and four
// packages in the binary. The attributes are those of the semantic
// conventions for an HTTP server span (semconv v1.43.0), as otelgin sets
// them; the request's id, merchant and key hash, and a scrubbed url.path,
// are added by handlers' requestContext.
func traceRequests(tr *tracing.Tracing) gin.HandlerFunc {
	if !tr.Enabled() {
		return nil
	}
	tracer := tr.TracerProvider().Tracer(serverScope)
	prop := tr.Propagator()
	return func(c *gin.Context) {
		route := c.FullPath()
		switch route {
		case "/healthz", "/readyz", "/metrics", "/swagger/*any":
			c.Next()
			return
		}
		req := c.Request
		ctx := prop.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		name := req.Method
		if !knownMethod(name) {
			name = "HTTP"
		}
		if route != "" {
			name += " " + route
		}
		// The attributes go on after the start, and only on a span that
		// records: a request the sampler leaves out (at a 10% ratio, nine
		// in ten) builds none. None of the samplers the OTEL_TRACES_SAMPLER
		// variable names reads them.
		ctx, span := tracer.Start(ctx, name, serverKind)
		recording := span.IsRecording()
		if recording {
			span.SetAttributes(serverAttributes(c, req, route)...)
		}
		c.Request = req.WithContext(ctx)

		c.Next()

		if !recording {
			span.End()
			return
		}
		status := c.Writer.Status()
		attrs := make([]attribute.KeyValue, 0, 3)
		attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
		if n := c.Writer.Size(); n > 0 {
			attrs = append(attrs, semconv.HTTPResponseBodySize(n))
		}
		if status >= http.StatusInternalServerError {
			attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(status)))
			span.SetStatus(codes.Error, "")
		}
		span.SetAttributes(attrs...)
		span.End()
	}
}

// serverScope is the instrumentation scope of the requests' spans.
const serverScope = "github.com/idemkeys/payments/internal/app"

// serverKind is made once: the option is an interface, which each call of
// trace.WithSpanKind allocates.
var serverKind = trace.WithSpanKind(trace.SpanKindServer)

// knownMethod reports whether the semantic conventions know method m: a
// span's name gives any other as HTTP, and its http.request.method as
// _OTHER with the original beside it.
func knownMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// serverAttributes are the request's attributes when its span starts.
func serverAttributes(c *gin.Context, req *http.Request, route string) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 12)
	if knownMethod(req.Method) {
		attrs = append(attrs, semconv.HTTPRequestMethodKey.String(req.Method))
	} else {
		attrs = append(attrs, semconv.HTTPRequestMethodOther, semconv.HTTPRequestMethodOriginal(req.Method))
	}
	scheme, defaultPort := "http", 80
	if req.TLS != nil {
		scheme, defaultPort = "https", 443
	}
	attrs = append(attrs, semconv.URLScheme(scheme), semconv.URLPath(req.URL.Path))
	if host, port := splitHostPort(req.Host); host != "" {
		attrs = append(attrs, semconv.ServerAddress(host))
		if port > 0 && port != defaultPort {
			attrs = append(attrs, semconv.ServerPort(port))
		}
	}
	if peer, port := splitHostPort(req.RemoteAddr); peer != "" {
		attrs = append(attrs, semconv.NetworkPeerAddress(peer))
		if port > 0 {
			attrs = append(attrs, semconv.NetworkPeerPort(port))
		}
	}
	if ip := c.ClientIP(); ip != "" {
		attrs = append(attrs, semconv.ClientAddress(ip))
	}
	if ua := req.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	if req.ProtoMajor == 1 {
		attrs = append(attrs, semconv.NetworkProtocolVersion("1."+strconv.Itoa(req.ProtoMinor)))
	} else if req.ProtoMajor > 1 {
		attrs = append(attrs, semconv.NetworkProtocolVersion(strconv.Itoa(req.ProtoMajor)))
	}
	if route != "" {
		attrs = append(attrs, semconv.HTTPRoute(route))
	}
	return attrs
}

// splitHostPort splits "host:port" (the port -1 when absent or not a
// number); a bracketed IPv6 host loses its brackets.
func splitHostPort(hostport string) (string, int) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return strings.Trim(hostport, "[]"), -1
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return host, -1
	}
	return host, int(p)
}
