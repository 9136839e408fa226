package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/internal/tracing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name     string
		vars     map[string]string
		endpoint string // "" means off
		service  string
		wantErr  []string // every one must appear in the error
	}{
		{name: "nothing set is off", vars: nil},
		{name: "the general endpoint gets the traces path", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"},
			endpoint: "http://jaeger:4318/v1/traces"},
		{name: "a general endpoint with a path and a slash", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel.example/collector/"},
			endpoint: "https://otel.example/collector/v1/traces"},
		{name: "the traces endpoint is used as it is", vars: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/custom"},
			endpoint: "http://b:4318/custom"},
		{name: "exporter otlp", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "otlp"},
			endpoint: "http://a:4318/v1/traces"},
		{name: "exporter none turns it off", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "the SDK disabled turns it off", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "http/protobuf is accepted", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			endpoint: "http://a:4318/v1/traces"},
		{name: "the service name", vars: map[string]string{"OTEL_SERVICE_NAME": "checkout"}, service: "checkout"},
		{name: "another exporter", vars: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: []string{"OTEL_TRACES_EXPORTER", "zipkin"}},
		{name: "gRPC", vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, wantErr: []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"}},
		{name: "no scheme", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "jaeger:4318"}, wantErr: []string{"OTEL_EXPORTER_OTLP_ENDPOINT"}},
		{name: "a bad traces endpoint", vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://x/v1/traces"}, wantErr: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}},
		{name: "the exporter's settings", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%20cret", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip"},
			endpoint: "http://a:4318/v1/traces"},
		{name: "headers that are not pairs", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=1,oops"},
			wantErr: []string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", `"oops"`}},
		{name: "a timeout that is not milliseconds", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
			wantErr: []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "milliseconds"}},
		{name: "a compression other than gzip", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
			wantErr: []string{"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip or none"}},
		{name: "a certificate that cannot be read", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"},
			wantErr: []string{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"}},
		{name: "a client certificate without its key", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/x/cert.pem"},
			wantErr: []string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "CLIENT_KEY"}},
		{name: "the exporter's settings are not read with tracing off", vars: map[string]string{
			"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}},
		{name: "nor with the exporter none", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}},
		{name: "a query is refused, and not shown", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://u:pw@a:4318/?token=s3cret"},
			wantErr: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "no query", `"http://u:xxxxx@a:4318/" with one`}},
		{name: "every problem at once", vars: map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_ENDPOINT": "::"},
			wantErr: []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tracing.FromEnv(env(tt.vars))
			if tt.wantErr != nil {
				for _, want := range tt.wantErr {
					require.ErrorContains(t, err, want)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.endpoint, s.Endpoint)
			require.Equal(t, tt.endpoint != "", s.Enabled())
			require.Equal(t, tt.service, s.ServiceName)
		})
	}
}

// recorder is a Tracing that records into memory.
func recorder(t *testing.T) (*tracing.Tracing, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tracing.New(tp), exp
}

func TestStartLinkedLinksBackToTheStoredTraceParent(t *testing.T) {
	tr, exp := recorder(t)
	reqCtx, end := tr.StartLinked(context.Background(), "request", "", "k", "v")
	stored := tr.TraceParent(reqCtx)
	end(nil)
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, stored)
	require.Equal(t, stored, tracing.TraceParent(reqCtx))

	// Later, in another trace: the reconciler's span links to the request.
	ctx, end := tr.StartLinked(context.Background(), "reconcile payment", stored, "payment.id", "pay_1")
	tr.Annotate(ctx, "extra", "yes")
	end(errors.New("provider down"))

	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	req, rec := spans[0], spans[1]
	require.NotEqual(t, req.SpanContext.TraceID(), rec.SpanContext.TraceID(), "a new trace")
	require.Len(t, rec.Links, 1)
	require.Equal(t, req.SpanContext.TraceID(), rec.Links[0].SpanContext.TraceID())
	require.Equal(t, req.SpanContext.SpanID(), rec.Links[0].SpanContext.SpanID())
	require.Contains(t, rec.Attributes, attribute.String("payment.id", "pay_1"))
	require.Contains(t, rec.Attributes, attribute.String("extra", "yes"))
	require.Equal(t, codes.Error, rec.Status.Code)
	require.Equal(t, "provider down", rec.Status.Description)
}

// TestTraceParentIsWhatThePropagatorWrites: the stored traceparent is
// the W3C header that propagation.TraceContext writes for the same span,
// sampled or not, with or without a trace state, and reads back to it.
func TestTraceParentIsWhatThePropagatorWrites(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, err := trace.ParseTraceState("congo=t61rcWkgMzE")
	require.NoError(t, err)
	for _, cfg := range []trace.SpanContextConfig{
		{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled},
		{TraceID: tid, SpanID: sid},
		{TraceID: tid, SpanID: sid, TraceFlags: 0xff, TraceState: ts, Remote: true},
	} {
		sc := trace.NewSpanContext(cfg)
		ctx := trace.ContextWithSpanContext(context.Background(), sc)
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, carrier)
		got := tracing.TraceParent(ctx)
		require.Equal(t, carrier.Get("traceparent"), got)
		back := tracing.SpanContext(got)
		require.Equal(t, sc.TraceID(), back.TraceID())
		require.Equal(t, sc.SpanID(), back.SpanID())
		require.Equal(t, sc.IsSampled(), back.IsSampled())
	}
	require.Empty(t, tracing.TraceParent(context.Background()))
}

func TestStartLinkedWithoutAValidTraceParentLinksNothing(t *testing.T) {
	tr, exp := recorder(t)
	for _, tp := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01"} {
		_, end := tr.StartLinked(context.Background(), "x", tp, "k", "v")
		end(nil)
	}
	for _, s := range exp.GetSpans() {
		require.Empty(t, s.Links)
	}
	require.False(t, tracing.SpanContext("garbage").IsValid())
}

func TestOffRecordsNothing(t *testing.T) {
	tr := tracing.Off()
	require.False(t, tr.Enabled())
	ctx, end := tr.StartLinked(context.Background(), "x", "", "k", "v")
	end(nil)
	require.False(t, trace.SpanContextFromContext(ctx).IsValid())
	require.Empty(t, tr.TraceParent(ctx))
	h := http.NewServeMux()
	require.Equal(t, http.Handler(h), tr.Handler(h, "x"), "nothing is wrapped")
	require.Equal(t, http.DefaultTransport, tr.Transport(nil))
	require.NoError(t, tr.Shutdown(context.Background()))
}

// TestChildrenOfAnUnsampledRequestRecordNothing: at the guide's 10%
// parent-based ratio, about one request in ten records its span, and the
// database's and Redis's children record only under those: an unsampled
// request starts no child at all.
func TestChildrenOfAnUnsampledRequestRecordNothing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tracing.New(tp)
	server, db := tr.TracerProvider().Tracer("server"), tr.Children().Tracer("db")
	const requests = 2000
	sampled := 0
	for range requests {
		ctx, span := server.Start(context.Background(), "POST /v1/orders")
		if span.IsRecording() {
			sampled++
		}
		_, child := db.Start(ctx, "BATCH")
		require.Equal(t, span.IsRecording(), child.IsRecording())
		if !span.IsRecording() {
			require.Equal(t, span, child, "no child started under an unsampled request")
		}
		child.End()
		span.End()
	}
	t.Logf("%d of %d requests sampled at a 0.1 ratio", sampled, requests)
	require.InDelta(t, requests/10, sampled, requests/20)
	require.Len(t, exp.GetSpans(), 2*sampled)
}

func TestChildrenRecordOnlyInsideATrace(t *testing.T) {
	tr, exp := recorder(t)
	db := tr.Children().Tracer("db")
	_, orphan := db.Start(context.Background(), "SELECT from a poller")
	orphan.End()
	require.False(t, orphan.SpanContext().IsValid())
	require.Empty(t, exp.GetSpans(), "no trace of its own for background polling")

	ctx, end := tr.StartLinked(context.Background(), "request", "", "k", "v")
	_, child := db.Start(ctx, "SELECT in a request")
	child.End()
	end(nil)
	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	require.Equal(t, spans[1].SpanContext.SpanID(), spans[0].Parent.SpanID())
}

func TestLogHandlerAddsTheTraceID(t *testing.T) {
	tr, _ := recorder(t)
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	ctx, end := tr.StartLinked(context.Background(), "request", "", "k", "v")
	defer end(nil)
	log.InfoContext(ctx, "inside")
	log.InfoContext(context.Background(), "outside")
	log.Info("no context")

	sc := trace.SpanContextFromContext(ctx)
	dec := json.NewDecoder(&buf)
	var lines []map[string]any
	for dec.More() {
		var l map[string]any
		require.NoError(t, dec.Decode(&l))
		lines = append(lines, l)
	}
	require.Len(t, lines, 3)
	require.Equal(t, sc.TraceID().String(), lines[0]["trace_id"])
	require.Equal(t, sc.SpanID().String(), lines[0]["span_id"])
	require.Equal(t, "test", lines[0]["component"], "WithAttrs keeps the wrapper")
	for _, l := range lines[1:] {
		require.NotContains(t, l, "trace_id")
	}
}

type countingObserver struct{ outcomes []string }

func (c *countingObserver) Outcome(_ context.Context, _ string, o string) {
	c.outcomes = append(c.outcomes, o)
}
func (c *countingObserver) Waited(context.Context, string, time.Duration)    {}
func (c *countingObserver) Processed(context.Context, string, time.Duration) {}

func TestObserverPutsTheOutcomeOnTheSpan(t *testing.T) {
	tr, exp := recorder(t)
	next := &countingObserver{}
	obs := tracing.Observer(next)
	ctx, end := tr.StartLinked(context.Background(), "POST /v1/orders", "", "k", "v")
	obs.Waited(ctx, "/v1/orders", 20*time.Millisecond)
	obs.Outcome(ctx, "/v1/orders", "replayed")
	end(nil)
	obs.Outcome(context.Background(), "/v1/orders", "executed") // no span: only the metrics hear it

	require.Equal(t, []string{"replayed", "executed"}, next.outcomes)
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	require.Contains(t, spans[0].Attributes, attribute.String(tracing.AttrIdempotencyOutcome, "replayed"))
	require.Len(t, spans[0].Events, 1)
}

// TestStartExportsOverOTLPAndShutdownFlushes: with an endpoint, spans go
// over OTLP/HTTP in protobuf, named by the service, and Shutdown sends the
// batch that has not gone yet; the provider's handler continues a caller's
// traceparent and the transport sends one.
func TestStartExportsOverOTLPAndShutdownFlushes(t *testing.T) {
	receiver := testkit.StartOTLPReceiver(t)
	settings, err := tracing.FromEnv(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.URL}))
	require.NoError(t, err)
	tr, err := tracing.Start(context.Background(), "payments-test", settings, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.True(t, tr.Enabled())

	server := httptest.NewServer(tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), "downstream"))
	defer server.Close()
	client := &http.Client{Transport: tr.Transport(nil)}
	ctx, end := tr.StartLinked(context.Background(), "caller", "", "k", "v")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server.URL+"/things", nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	end(nil)

	require.Empty(t, receiver.Spans(), "batched: nothing sent yet")
	require.NoError(t, tr.Shutdown(context.Background()))
	spans := receiver.Spans()
	require.Len(t, spans, 3, "the caller, its client span and the server span")
	byName := map[string]testkit.ReceivedSpan{}
	for _, s := range spans {
		require.Equal(t, "payments-test", s.Service)
		require.Equal(t, spans[0].TraceID, s.TraceID, "one trace across the hop")
		byName[s.Name] = s
	}
	require.Equal(t, byName["caller"].SpanID, byName["GET /things"].ParentSpanID)
	srvSpan := byName["GET"]
	require.Equal(t, "SPAN_KIND_SERVER", srvSpan.Kind)
	require.Equal(t, byName["GET /things"].SpanID, srvSpan.ParentSpanID, "the server continued the traceparent")
}
