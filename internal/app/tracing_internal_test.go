package app

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkeys/payments/internal/tracing"
)

// The request's server span: named by method and route, the HTTP
// attributes of the conventions, the caller's trace continued, a 5xx an
// error, probes left out.
func TestServerSpanOfARequest(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(traceRequests(tracing.New(tp)))
	r.POST("/v1/orders/:id", func(c *gin.Context) { c.String(http.StatusCreated, "made") })
	r.GET("/fail", func(c *gin.Context) { c.Status(http.StatusServiceUnavailable) })
	r.GET("/healthz", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.Handle("PURGE", "/v1/orders/:id", func(c *gin.Context) { c.Status(http.StatusNoContent) })

	serve := func(method, target string, header http.Header) {
		req := httptest.NewRequest(method, target, nil)
		req.Host = "api.example:8443"
		req.RemoteAddr = "192.0.2.7:40123"
		req.Header.Set("User-Agent", "retrying-client/1.0")
		for k, v := range header {
			req.Header[k] = v
		}
		r.ServeHTTP(httptest.NewRecorder(), req)
	}
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	serve(http.MethodPost, "/v1/orders/ord_1", http.Header{"Traceparent": {parent}})
	serve(http.MethodGet, "/fail", nil)
	serve(http.MethodGet, "/healthz", nil)
	serve("PURGE", "/v1/orders/ord_1", nil)
	serve(http.MethodGet, "/nowhere", nil)

	ended := rec.Ended()
	require.Len(t, ended, 4, "every request but the probe has a span")
	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
		m := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			m[kv.Key] = kv.Value.String()
		}
		return m
	}

	post := ended[0]
	require.Equal(t, "POST /v1/orders/:id", post.Name())
	require.Equal(t, trace.SpanKindServer, post.SpanKind())
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", post.SpanContext().TraceID().String(), "the caller's trace goes on")
	require.Equal(t, "00f067aa0ba902b7", post.Parent().SpanID().String())
	require.Equal(t, map[attribute.Key]string{
		"http.request.method": "POST", "url.scheme": "http", "url.path": "/v1/orders/ord_1",
		"server.address": "api.example", "server.port": "8443",
		"network.peer.address": "192.0.2.7", "network.peer.port": "40123", "client.address": "192.0.2.7",
		"user_agent.original": "retrying-client/1.0", "network.protocol.version": "1.1",
		"http.route": "/v1/orders/:id", "http.response.status_code": "201", "http.response.body.size": "4",
	}, attrs(post))
	require.Equal(t, codes.Unset, post.Status().Code)

	fail := ended[1]
	require.Equal(t, "GET /fail", fail.Name())
	require.False(t, fail.Parent().IsValid(), "a request without traceparent starts a trace")
	require.Equal(t, codes.Error, fail.Status().Code)
	require.Equal(t, "503", attrs(fail)["error.type"])

	purge := ended[2]
	require.Equal(t, "HTTP /v1/orders/:id", purge.Name(), "a method the conventions do not know")
	require.Equal(t, "_OTHER", attrs(purge)["http.request.method"])
	require.Equal(t, "PURGE", attrs(purge)["http.request.method_original"])

	lost := ended[3]
	require.Equal(t, "GET", lost.Name(), "no route: the method alone")
	require.NotContains(t, attrs(lost), attribute.Key("http.route"))
	require.Equal(t, "404", attrs(lost)["http.response.status_code"])
}
