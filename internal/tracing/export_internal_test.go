package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP endpoint that keeps what it is sent and
// answers with the statuses a test queues (200 once they run out).
type collector struct {
	srv *httptest.Server

	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	answers  []func(http.ResponseWriter)
	requests int
}

func startCollector(t *testing.T, answers ...func(http.ResponseWriter)) *collector {
	t.Helper()
	c := &collector{answers: answers}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body, _ = io.ReadAll(zr)
	}
	c.mu.Lock()
	c.requests++
	c.bodies = append(c.bodies, body)
	c.headers = append(c.headers, r.Header.Clone())
	var answer func(http.ResponseWriter)
	if len(c.answers) > 0 {
		answer, c.answers = c.answers[0], c.answers[1:]
	}
	c.mu.Unlock()
	if answer != nil {
		answer(w)
	}
}

func (c *collector) received() (bodies [][]byte, headers []http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.bodies), slices.Clone(c.headers)
}

func status(code int, retryAfter string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		http.Error(w, "collector says "+http.StatusText(code), code)
	}
}

// sampleSpans are spans with everything the wire format carries: every
// type of attribute value, events, links to a remote span, a trace state,
// an error status, scopes with a version, attributes and a schema, two
// resources, a span with no parent and one with a remote one, an invalid
// UTF-8 string.
func sampleSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	return sampleSpansWith(t, "curl\xff/8")
}

func sampleSpansWith(t *testing.T, userAgent string) []sdktrace.ReadOnlySpan {
	t.Helper()
	api, err := resource.New(context.Background(), resource.WithAttributes(attribute.String("service.name", "payments-api"),
		attribute.Int("instance", 2)), resource.WithTelemetrySDK())
	require.NoError(t, err)
	other := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "worker"))
	ts, err := trace.ParseTraceState("vendor=abc,other=x")
	require.NoError(t, err)
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sc := func(span string, remote bool) trace.SpanContext {
		sid, _ := trace.SpanIDFromHex(span)
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: remote})
	}
	start := time.Date(2026, 12, 2, 17, 0, 0, 123456789, time.UTC)
	server := instrumentation.Scope{Name: "github.com/idemkeys/payments/internal/app", Version: "1.2.3",
		SchemaURL: "https://opentelemetry.io/schemas/1.43.0", Attributes: attribute.NewSet(attribute.Bool("scoped", true))}
	database := instrumentation.Scope{Name: "github.com/idemkeys/payments/internal/database"}
	stubs := tracetest.SpanStubs{
		{
			Name: "POST /v1/orders", SpanContext: sc("b7ad6b7169203331", false), Parent: sc("00f067aa0ba902b7", true),
			SpanKind: trace.SpanKindServer, StartTime: start, EndTime: start.Add(3 * time.Millisecond),
			Attributes: []attribute.KeyValue{
				attribute.String("http.request.method", "POST"), attribute.String("empty", ""),
				attribute.Int64("http.response.status_code", 201), attribute.Int64("negative", -42), attribute.Int64("zero", 0),
				attribute.Float64("ratio", 0.25), attribute.Bool("yes", true), attribute.Bool("no", false),
				attribute.StringSlice("list", []string{"a", "", "c"}), attribute.Int64Slice("ints", []int64{1, -2}),
				attribute.Float64Slice("floats", []float64{1.5}), attribute.BoolSlice("bools", []bool{true, false}),
				attribute.String("user_agent.original", userAgent),
				{Key: "bytes", Value: attribute.ByteSliceValue([]byte{0, 1, 2})},
				{Key: "nested", Value: attribute.SliceValue(attribute.StringValue("x"), attribute.IntValue(7))},
				{Key: "map", Value: attribute.MapValue(attribute.String("k", "v"), attribute.Int("n", 1))},
				{Key: "nothing", Value: attribute.Value{}},
			},
			DroppedAttributes: 3,
			Events: []sdktrace.Event{{Name: "retry", Time: start.Add(time.Millisecond), Attributes: []attribute.KeyValue{attribute.Int("attempt", 2)},
				DroppedAttributeCount: 1}},
			DroppedEvents: 1,
			Links: []sdktrace.Link{{SpanContext: sc("1111111111111111", true), Attributes: []attribute.KeyValue{attribute.String("why", "request")},
				DroppedAttributeCount: 2}},
			DroppedLinks:         4,
			Status:               sdktrace.Status{Code: codes.Error, Description: "it broke"},
			Resource:             api,
			InstrumentationScope: server,
		},
		{
			Name: "BATCH", SpanContext: sc("2222222222222222", false), Parent: sc("b7ad6b7169203331", false),
			SpanKind: trace.SpanKindClient, StartTime: start, EndTime: start.Add(time.Millisecond),
			Attributes: []attribute.KeyValue{attribute.String("db.query.text", strings.Repeat("INSERT INTO orders VALUES ($1); ", 40))},
			Status:     sdktrace.Status{Code: codes.Ok},
			Resource:   api, InstrumentationScope: database,
		},
		{
			Name: "background", SpanContext: sc("3333333333333333", false), SpanKind: trace.SpanKindInternal,
			StartTime: start, EndTime: start, Resource: other, InstrumentationScope: instrumentation.Scope{},
		},
		{
			Name: "POST /v1/orders/{id}/payments", SpanContext: sc("4444444444444444", false), SpanKind: trace.SpanKind(99),
			StartTime: start, EndTime: start.Add(time.Second), Resource: api, InstrumentationScope: server,
		},
	}
	return stubs.Snapshots()
}

// decode reads an export request, its resources in a stable order (the
// SDK's exporter writes them in a map's).
func decode(t *testing.T, body []byte) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	var req coltracepb.ExportTraceServiceRequest
	require.NoError(t, proto.Unmarshal(body, &req))
	slices.SortFunc(req.ResourceSpans, func(a, b *tracepb.ResourceSpans) int {
		return strings.Compare(prototext.Format(a.Resource), prototext.Format(b.Resource))
	})
	return &req
}

// TestExporterSendsInvalidUTF8AsReplacement: the SDK's exporter alone
// drops a whole batch for one string that is not UTF-8; ours sends every
// span, the bad bytes as U+FFFD, and what it sends is what the SDK's
// exporter sends for the same spans written validly.
func TestExporterSendsInvalidUTF8AsReplacement(t *testing.T) {
	spans := sampleSpans(t)
	ctx := context.Background()

	sdk := startCollector(t)
	sdkExporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sdk.srv.URL+"/v1/traces"))
	require.NoError(t, err)
	err = sdkExporter.ExportSpans(ctx, spans)
	require.ErrorContains(t, err, "invalid UTF-8", "the SDK's exporter drops a whole batch for one bad string")

	ours := startCollector(t)
	require.NoError(t, exporterFor(t, ours, nil).ExportSpans(ctx, spans))
	bodies, headers := ours.received()
	require.Len(t, bodies, 1)
	require.Equal(t, "application/x-protobuf", headers[0].Get("Content-Type"))
	got := decode(t, bodies[0])
	n := 0
	for _, rs := range got.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	require.Equal(t, len(spans), n, "every span of the batch")
	attrs := got.ResourceSpans[0].ScopeSpans[0].Spans[0].Attributes
	i := slices.IndexFunc(attrs, func(kv *commonpb.KeyValue) bool { return kv.GetKey() == "user_agent.original" })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, "curl\uFFFD/8", attrs[i].GetValue().GetStringValue(), "invalid UTF-8 becomes U+FFFD")

	// The same spans written validly, through the SDK's exporter alone:
	// the same request, field for field.
	require.NoError(t, sdkExporter.ExportSpans(ctx, sampleSpansWith(t, "curl\uFFFD/8")))
	sdkBodies, _ := sdk.received()
	require.Len(t, sdkBodies, 1)
	want := decode(t, sdkBodies[0])
	require.True(t, proto.Equal(want, got), "the SDK's exporter:\n%s\nours:\n%s", prototext.Format(want), prototext.Format(got))

	// A span is copied only when it holds bad text: valid ones go as the
	// SDK made them.
	valid := sampleSpansWith(t, "curl/8")
	require.True(t, spanIsValid(valid[0]))
	require.False(t, spanIsValid(spans[0]))
	bad := tracetest.SpanStub{Name: "GET /\xfe", Status: sdktrace.Status{Code: codes.Error, Description: "no\xff"},
		Events: []sdktrace.Event{{Name: "e\xff", Attributes: []attribute.KeyValue{attribute.StringSlice("s", []string{"ok", "x\xff"})}}},
		Links:  []sdktrace.Link{{Attributes: []attribute.KeyValue{attribute.String("k\xff", "v")}}}}.Snapshot()
	clean := sanitize(bad)
	require.True(t, spanIsValid(clean))
	require.Equal(t, "GET /\uFFFD", clean.Name())
	require.Equal(t, "no\uFFFD", clean.Status().Description)
	require.Equal(t, []string{"ok", "x\uFFFD"}, clean.Events()[0].Attributes[0].Value.AsStringSlice())
	require.Equal(t, attribute.Key("k\uFFFD"), clean.Links()[0].Attributes[0].Key)
	require.Equal(t, "GET /\xfe", bad.Name(), "the recorded span is left as it was")
}

func exporterFor(t *testing.T, c *collector, vars map[string]string) sdktrace.SpanExporter {
	t.Helper()
	s, errs := exportFromEnv(func(k string) string { return vars[k] })
	require.Empty(t, errs)
	e, err := newExporter(context.Background(), c.srv.URL+"/v1/traces", s)
	require.NoError(t, err)
	return e
}

// TestExporterTriesAgainWhatTheCollectorCannotTakeYet: 503 and 429 are
// tried again, the same bytes, and the batch gets through.
func TestExporterTriesAgainWhatTheCollectorCannotTakeYet(t *testing.T) {
	c := startCollector(t, status(http.StatusServiceUnavailable, ""), status(http.StatusTooManyRequests, "0"))
	require.NoError(t, exporterFor(t, c, nil).ExportSpans(context.Background(), sampleSpans(t)[1:2]))
	bodies, _ := c.received()
	require.Len(t, bodies, 3)
	require.Equal(t, bodies[0], bodies[2])
	require.Equal(t, bodies[1], bodies[2])
}

// TestExporterDropsWhatTheCollectorRefuses: a 400 is not tried again, and
// the error says what the collector said; a user and password in the
// endpoint go as Basic authorization and stay out of the error.
func TestExporterDropsWhatTheCollectorRefuses(t *testing.T) {
	c := startCollector(t, status(http.StatusBadRequest, ""))
	s, errs := exportFromEnv(func(string) string { return "" })
	require.Empty(t, errs)
	endpoint := strings.Replace(c.srv.URL, "http://", "http://otel:s3cret@", 1) + "/v1/traces"
	e, err := newExporter(context.Background(), endpoint, s)
	require.NoError(t, err)
	err = e.ExportSpans(context.Background(), sampleSpans(t)[1:2])
	require.ErrorContains(t, err, "400 Bad Request")
	require.ErrorContains(t, err, "collector says Bad Request")
	require.NotContains(t, err.Error(), "s3cret", "a password in the endpoint stays out of the logs")
	bodies, headers := c.received()
	require.Len(t, bodies, 1)
	user, password, ok := (&http.Request{Header: headers[0]}).BasicAuth()
	require.True(t, ok)
	require.Equal(t, "otel", user)
	require.Equal(t, "s3cret", password)
}

// TestExporterGivesUpAtItsTimeout: a collector that stays unavailable
// costs the batch, after OTEL_EXPORTER_OTLP_TIMEOUT and not much more.
func TestExporterGivesUpAtItsTimeout(t *testing.T) {
	var answers []func(http.ResponseWriter)
	for range 100 {
		answers = append(answers, status(http.StatusBadGateway, ""))
	}
	c := startCollector(t, answers...)
	started := time.Now()
	err := exporterFor(t, c, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "600"}).ExportSpans(context.Background(), sampleSpans(t)[1:2])
	require.ErrorContains(t, err, "collector says Bad Gateway")
	require.ErrorContains(t, err, "max retry time")
	require.Less(t, time.Since(started), 5*time.Second)
	bodies, _ := c.received()
	require.GreaterOrEqual(t, len(bodies), 2, "tried again within the timeout")

	// A Retry-After beyond the timeout is not waited for.
	c = startCollector(t, status(http.StatusServiceUnavailable, "3600"))
	started = time.Now()
	err = exporterFor(t, c, nil).ExportSpans(context.Background(), sampleSpans(t)[1:2])
	require.ErrorContains(t, err, "collector says Service Unavailable")
	require.ErrorContains(t, err, "max retry time would elapse")
	require.Less(t, time.Since(started), 5*time.Second)
}

// TestExporterReportsAPartialSuccess: spans the collector took but then
// rejected are an error, with its message.
func TestExporterReportsAPartialSuccess(t *testing.T) {
	answer, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
		RejectedSpans: 2, ErrorMessage: "spans too old"}})
	require.NoError(t, err)
	c := startCollector(t, func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(answer)
	})
	err = exporterFor(t, c, nil).ExportSpans(context.Background(), sampleSpans(t)[1:2])
	require.ErrorContains(t, err, "2 spans rejected")
	require.ErrorContains(t, err, "spans too old")
}

// TestExporterSendsItsHeadersCompressed: the headers of the variables,
// percent-decoded, the traces' own before the general ones, and gzip.
func TestExporterSendsItsHeadersCompressed(t *testing.T) {
	c := startCollector(t)
	e := exporterFor(t, c, map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":        "authorization=Basic%20abc%3D, x-tenant = acme",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-only-traces=1",
		"OTEL_EXPORTER_OTLP_COMPRESSION":    "gzip",
	})
	spans := sampleSpans(t)[1:3]
	require.NoError(t, e.ExportSpans(context.Background(), spans))
	require.NoError(t, e.ExportSpans(context.Background(), spans))
	bodies, headers := c.received()
	require.Len(t, bodies, 2)
	require.Equal(t, "1", headers[0].Get("X-Only-Traces"))
	require.Empty(t, headers[0].Get("Authorization"), "the traces' own variable wins whole")
	require.Equal(t, "gzip", headers[0].Get("Content-Encoding"))
	req := decode(t, bodies[0])
	require.True(t, proto.Equal(req, decode(t, bodies[1])), "the same spans, the same request (the SDK writes resources in a map's order)")
	require.Len(t, req.ResourceSpans, 2)

	c = startCollector(t)
	e = exporterFor(t, c, map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Basic%20abc%3D, x-tenant = acme"})
	require.NoError(t, e.ExportSpans(context.Background(), spans))
	_, headers = c.received()
	require.Equal(t, "Basic abc=", headers[0].Get("Authorization"))
	require.Equal(t, "acme", headers[0].Get("X-Tenant"))
	require.Empty(t, headers[0].Get("Content-Encoding"))
}

// TestExporterChecksTheCollectorsCertificate: an https collector whose
// certificate is in OTEL_EXPORTER_OTLP_CERTIFICATE is reached; without it,
// the export fails on the certificate, not silently.
func TestExporterChecksTheCollectorsCertificate(t *testing.T) {
	var got atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.Add(1)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "collector.pem")
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	spans := sampleSpans(t)[1:2]

	s, errs := exportFromEnv(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "1000"}[k]
	})
	require.Empty(t, errs)
	e, err := newExporter(context.Background(), srv.URL+"/v1/traces", s)
	require.NoError(t, err)
	err = e.ExportSpans(context.Background(), spans)
	require.ErrorContains(t, err, "certificate")
	require.Zero(t, got.Load())

	s, errs = exportFromEnv(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": file, "OTEL_EXPORTER_OTLP_TIMEOUT": "5000"}[k]
	})
	require.Empty(t, errs)
	require.Equal(t, 5*time.Second, s.timeout)
	e, err = newExporter(context.Background(), srv.URL+"/v1/traces", s)
	require.NoError(t, err)
	require.NoError(t, e.ExportSpans(context.Background(), spans))
	require.EqualValues(t, 1, got.Load())
}

// TestExporterFromZeroSettingsUsesTheDefaults: Settings built by hand
// (no FromEnv) export with the protobuf headers.
func TestExporterFromZeroSettingsUsesTheDefaults(t *testing.T) {
	c := startCollector(t)
	e, err := newExporter(context.Background(), c.srv.URL+"/v1/traces", exportSettings{})
	require.NoError(t, err)
	require.NoError(t, e.ExportSpans(context.Background(), sampleSpans(t)[1:2]))
	_, headers := c.received()
	require.Equal(t, "application/x-protobuf", headers[0].Get("Content-Type"))
}

// TestExporterAfterShutdownDropsQuietly: the SDK shuts the exporter down
// after its last batch; a late one is dropped without a request.
func TestExporterAfterShutdownDropsQuietly(t *testing.T) {
	c := startCollector(t)
	e := exporterFor(t, c, nil)
	require.NoError(t, e.Shutdown(context.Background()))
	require.NoError(t, e.ExportSpans(context.Background(), sampleSpans(t)))
	bodies, _ := c.received()
	require.Empty(t, bodies)
}

// BenchmarkExport is the exporter's work on a create's two spans (the
// server's and its batch's, 23 attributes): the SDK's exporter alone and
// behind the UTF-8 check, both sending to a collector on loopback. The
// check reads every string once and copies nothing when all are valid.
func BenchmarkExport(b *testing.B) {
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	res, _ := resource.New(context.Background(), resource.WithAttributes(attribute.String("service.name", "payments-api")), resource.WithTelemetrySDK())
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	server := tracetest.SpanStub{Name: "POST /v1/orders", SpanContext: sc, SpanKind: trace.SpanKindServer, Resource: res,
		StartTime: time.Now(), EndTime: time.Now(),
		InstrumentationScope: instrumentation.Scope{Name: "github.com/idemkeys/payments/internal/app"},
		Attributes: []attribute.KeyValue{attribute.String("http.request.method", "POST"), attribute.String("url.scheme", "http"),
			attribute.String("url.path", "/v1/orders"), attribute.String("server.address", "127.0.0.1"), attribute.Int("server.port", 8080),
			attribute.String("network.peer.address", "127.0.0.1"), attribute.Int("network.peer.port", 50000),
			attribute.String("client.address", "127.0.0.1"), attribute.String("user_agent.original", "bench/1"),
			attribute.String("network.protocol.version", "1.1"), attribute.String("http.route", "/v1/orders"),
			attribute.String("request.id", "01JEXAMPLEEXAMPLEEXAMPLE00"), attribute.String("idempotency.key_hash", "9b2d0c1e4f5a6b7c"),
			attribute.String("merchant.id", "mch_acme"), attribute.String("idempotency.outcome", "executed"),
			attribute.Int("http.response.status_code", 201), attribute.Int("http.response.body_size", 412)}}
	batch := tracetest.SpanStub{Name: "BATCH", SpanContext: sc, SpanKind: trace.SpanKindClient, Resource: res,
		StartTime: time.Now(), EndTime: time.Now(),
		InstrumentationScope: instrumentation.Scope{Name: "github.com/idemkeys/payments/internal/database"},
		Attributes: []attribute.KeyValue{attribute.String("db.system.name", "postgresql"),
			attribute.String("db.query.text", strings.Repeat("INSERT INTO orders (a, b, c) VALUES ($1, $2, $3); ", 3)),
			attribute.String("db.operation.name", "BATCH"), attribute.String("server.address", "127.0.0.1"),
			attribute.Int("server.port", 5432), attribute.Int("db.operation.batch_size", 3)}}
	var spans []sdktrace.ReadOnlySpan
	for range 256 { // a batch of 512 spans, as the SDK's batcher sends
		spans = append(spans, server.Snapshot(), batch.Snapshot())
	}
	c := startCollectorB(b)
	sdkExporter, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(c.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	s, _ := exportFromEnv(func(string) string { return "" })
	ours, err := newExporter(context.Background(), c.URL+"/v1/traces", s)
	if err != nil {
		b.Fatal(err)
	}
	for _, x := range []struct {
		name string
		e    sdktrace.SpanExporter
	}{{"sdk", sdkExporter}, {"checked", ours}} {
		b.Run(x.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := x.e.ExportSpans(context.Background(), spans); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(spans)/2), "ns/create")
		})
	}
}

func startCollectorB(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(srv.Close)
	return srv
}
