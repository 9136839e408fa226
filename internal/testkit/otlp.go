package testkit

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPReceiver is a small OTLP/HTTP trace receiver: what a trace viewer's
// collector endpoint does, as far as a test needs it. Point
// OTEL_EXPORTER_OTLP_ENDPOINT at URL; it decodes every protobuf
// ExportTraceServiceRequest POSTed to /v1/traces and keeps its spans, and
// the raw request bodies too, so a test can search everything that was
// exported for what must never be.
type OTLPReceiver struct {
	// URL is the base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string

	mu    sync.Mutex
	spans []ReceivedSpan
	raw   [][]byte
}

// ReceivedSpan is one exported span, flattened for assertions: ids in hex,
// attribute values as strings.
type ReceivedSpan struct {
	Service            string
	TraceID, SpanID    string
	ParentSpanID       string
	Name               string
	Kind               string
	Attributes         map[string]string
	Events             []string
	Links              []ReceivedLink
	StatusCode, Status string
}

// ReceivedLink is a span's link to another span.
type ReceivedLink struct{ TraceID, SpanID string }

// StartOTLPReceiver serves a receiver on a loopback port until the test
// ends.
func StartOTLPReceiver(t testing.TB) *OTLPReceiver {
	t.Helper()
	r := &OTLPReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *OTLPReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "only POST /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var export coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &export); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	spans := flatten(&export)
	r.mu.Lock()
	r.raw = append(r.raw, data)
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func flatten(export *coltracepb.ExportTraceServiceRequest) []ReceivedSpan {
	var out []ReceivedSpan
	for _, rs := range export.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = valueString(kv.GetValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				rsp := ReceivedSpan{
					Service: service, TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind().String(),
					Attributes: attributes(s.GetAttributes()),
					StatusCode: s.GetStatus().GetCode().String(), Status: s.GetStatus().GetMessage(),
				}
				for _, e := range s.GetEvents() {
					rsp.Events = append(rsp.Events, fmt.Sprintf("%s %v", e.GetName(), attributes(e.GetAttributes())))
				}
				for _, l := range s.GetLinks() {
					rsp.Links = append(rsp.Links, ReceivedLink{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
				}
				out = append(out, rsp)
			}
		}
	}
	return out
}

func attributes(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = valueString(kv.GetValue())
	}
	return m
}

func valueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// Spans returns every span received so far.
func (r *OTLPReceiver) Spans() []ReceivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ReceivedSpan(nil), r.spans...)
}

// Contains reports whether s occurs anywhere in what was exported: in any
// span's name, attribute, event, link or status, or the resource, as the
// raw protobuf bytes hold them.
func (r *OTLPReceiver) Contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.raw {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	for _, sp := range r.spans {
		if strings.Contains(fmt.Sprint(sp), s) {
			return true
		}
	}
	return false
}
