package tracing

import (
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The spans' wire format: an OTLP ExportTraceServiceRequest in protobuf,
// written field by field from the SDK's spans into one buffer that is kept
// from one export to the next.
//
// The OTLP exporter of the SDK (otlptracehttp) first copies every span into
// the generated Go types of the OTLP protobuf, three allocations per
// attribute, then marshals those by reflection. For a create's two spans
// and their 23 attributes that was about 75,000 of the 145,000
// instructions that tracing added to the request (callgrind,
// BenchmarkHandler/postgres/traced), and 80 of its 107 allocations. What is
// written here is the same message, field for field, as that exporter's
// (TestWireMatchesTheSDKExporter decodes both and compares them), with no
// allocation once the buffer has grown. It differs in two places, both
// toward the specification: a string that is not UTF-8 has its bad bytes
// replaced (that exporter fails the whole batch), and a link carries its
// trace state (that exporter leaves it out).
//
// The field numbers are those of opentelemetry-proto's
// collector/trace/v1/trace_service.proto, trace/v1/trace.proto,
// common/v1/common.proto and resource/v1/resource.proto.

// wire is a protobuf message being written. A nested message is opened
// (its tag written, and one byte kept for its length), filled, then
// closed: its length goes in the byte kept, and a length too long for one
// byte (a span, a batch) moves the message's bytes up to make room.
type wire struct{ b []byte }

func (w *wire) open(n protowire.Number) int {
	w.b = appendTag(w.b, n, protowire.BytesType)
	w.b = append(w.b, 0)
	return len(w.b)
}

func (w *wire) close(start int) {
	n := len(w.b) - start
	if n < 0x80 {
		w.b[start-1] = byte(n)
		return
	}
	k := protowire.SizeVarint(uint64(n)) - 1
	w.b = slices.Grow(w.b, k)[:len(w.b)+k]
	copy(w.b[start+k:], w.b[start:start+n])
	protowire.AppendVarint(w.b[:start-1], uint64(n))
}

// appendVarint is protowire.AppendVarint, with the one-byte case (tags,
// most lengths and counts) inline.
func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

func appendTag(b []byte, n protowire.Number, t protowire.Type) []byte {
	return appendVarint(b, protowire.EncodeTag(n, t))
}

// str writes a string field, left out when empty (proto3). Protobuf
// strings are UTF-8: invalid bytes (a client's header, an error's text)
// become U+FFFD rather than failing the batch, as the SDK's exporter does.
func (w *wire) str(n protowire.Number, s string) {
	if s == "" {
		return
	}
	w.b = appendTag(w.b, n, protowire.BytesType)
	w.strValue(s)
}

func (w *wire) strValue(s string) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	w.b = appendVarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *wire) bytes(n protowire.Number, b []byte) {
	w.b = appendTag(w.b, n, protowire.BytesType)
	w.b = appendVarint(w.b, uint64(len(b)))
	w.b = append(w.b, b...)
}

func (w *wire) varint(n protowire.Number, v uint64) {
	if v == 0 {
		return
	}
	w.b = appendTag(w.b, n, protowire.VarintType)
	w.b = appendVarint(w.b, v)
}

func (w *wire) fixed64(n protowire.Number, v uint64) {
	if v == 0 {
		return
	}
	w.b = appendTag(w.b, n, protowire.Fixed64Type)
	w.b = protowire.AppendFixed64(w.b, v)
}

func (w *wire) fixed32(n protowire.Number, v uint32) {
	if v == 0 {
		return
	}
	w.b = appendTag(w.b, n, protowire.Fixed32Type)
	w.b = protowire.AppendFixed32(w.b, v)
}

// keyValue writes a KeyValue (key 1, value 2) as field n. The value is
// written even when empty, as the SDK's exporter does.
func (w *wire) keyValue(n protowire.Number, kv attribute.KeyValue) {
	m := w.open(n)
	w.str(1, string(kv.Key))
	v := w.open(2)
	w.anyValue(kv.Value)
	w.close(v)
	w.close(m)
}

func (w *wire) keyValues(n protowire.Number, attrs []attribute.KeyValue) {
	for _, kv := range attrs {
		w.keyValue(n, kv)
	}
}

func (w *wire) set(n protowire.Number, s attribute.Set) {
	for it := s.Iter(); it.Next(); {
		w.keyValue(n, it.Attribute())
	}
}

// anyValue writes an AnyValue's fields: one of string 1, bool 2, int 3,
// double 4, array 5, key-value list 6, bytes 7. A value of the oneof is
// written even when it is its type's zero.
func (w *wire) anyValue(v attribute.Value) {
	switch v.Type() {
	case attribute.STRING:
		w.b = appendTag(w.b, 1, protowire.BytesType)
		w.strValue(v.AsString())
	case attribute.BOOL:
		w.b = appendTag(w.b, 2, protowire.VarintType)
		w.b = appendVarint(w.b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		w.b = appendTag(w.b, 3, protowire.VarintType)
		w.b = appendVarint(w.b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		w.b = appendTag(w.b, 4, protowire.Fixed64Type)
		w.b = protowire.AppendFixed64(w.b, math.Float64bits(v.AsFloat64()))
	case attribute.BYTESLICE:
		w.bytes(7, v.AsByteSlice())
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		w.array(len(s), func(i int) attribute.Value { return attribute.BoolValue(s[i]) })
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		w.array(len(s), func(i int) attribute.Value { return attribute.Int64Value(s[i]) })
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		w.array(len(s), func(i int) attribute.Value { return attribute.Float64Value(s[i]) })
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		w.array(len(s), func(i int) attribute.Value { return attribute.StringValue(s[i]) })
	case attribute.SLICE:
		s := v.AsSlice()
		w.array(len(s), func(i int) attribute.Value { return s[i] })
	case attribute.MAP:
		m := w.open(6)
		w.keyValues(1, v.AsMap())
		w.close(m)
	case attribute.EMPTY:
	default:
		w.b = appendTag(w.b, 1, protowire.BytesType)
		w.b = protowire.AppendString(w.b, "INVALID")
	}
}

// array writes an ArrayValue (values 1) of n values as field 5. Slices are
// rare in spans: the closure's cost does not matter.
func (w *wire) array(n int, at func(int) attribute.Value) {
	a := w.open(5)
	for i := range n {
		e := w.open(1)
		w.anyValue(at(i))
		w.close(e)
	}
	w.close(a)
}

// group is the spans of one resource and one instrumentation scope, by
// their index in the batch.
type group struct {
	res   *resource.Resource
	scope instrumentation.Scope
	spans []int
	done  bool
}

// encoder writes export requests, reusing its buffer and its groups from
// one batch to the next. It is not safe for concurrent use.
type encoder struct {
	wire
	groups []group
}

// request is the ExportTraceServiceRequest of spans: one ResourceSpans per
// resource (field 1), each with one ScopeSpans per instrumentation scope,
// in the order they first appear in spans, each scope's spans in their
// order. The bytes are the encoder's until its next call.
func (e *encoder) request(spans []sdktrace.ReadOnlySpan) []byte {
	e.b = e.b[:0]
	for i := range e.groups {
		e.groups[i].spans = e.groups[i].spans[:0]
	}
	used := 0
	for i, s := range spans {
		if s == nil {
			continue
		}
		res, scope := s.Resource(), s.InstrumentationScope()
		g := slices.IndexFunc(e.groups[:used], func(g group) bool {
			return g.scope == scope && sameResource(g.res, res)
		})
		if g < 0 {
			if used == len(e.groups) {
				e.groups = append(e.groups, group{})
			}
			g, used = used, used+1
			e.groups[g].res, e.groups[g].scope, e.groups[g].done = res, scope, false
		}
		e.groups[g].spans = append(e.groups[g].spans, i)
	}
	for i := range used {
		if e.groups[i].done {
			continue
		}
		res := e.groups[i].res
		rs := e.open(1) // ResourceSpans
		if res != nil {
			r := e.open(1) // Resource
			e.set(1, *res.Set())
			e.close(r)
		}
		for j := i; j < used; j++ {
			if g := &e.groups[j]; !g.done && sameResource(g.res, res) {
				e.scopeSpans(spans, g)
				g.done = true
			}
		}
		if res != nil {
			e.str(3, res.SchemaURL())
		}
		e.close(rs)
	}
	for i := range used {
		// Let the spans' resources and scopes go until the next batch.
		e.groups[i].res, e.groups[i].scope = nil, instrumentation.Scope{}
	}
	return e.b
}

func sameResource(a, b *resource.Resource) bool {
	return a == b || (a != nil && b != nil && a.Equivalent() == b.Equivalent())
}

// scopeSpans writes a ScopeSpans (scope 1, spans 2, schema_url 3) as
// field 2 of a ResourceSpans.
func (e *encoder) scopeSpans(spans []sdktrace.ReadOnlySpan, g *group) {
	ss := e.open(2)
	if g.scope != (instrumentation.Scope{}) {
		sc := e.open(1) // InstrumentationScope: name 1, version 2, attributes 3
		e.str(1, g.scope.Name)
		e.str(2, g.scope.Version)
		e.set(3, g.scope.Attributes)
		e.close(sc)
	}
	for _, i := range g.spans {
		e.span(spans[i])
	}
	e.str(3, g.scope.SchemaURL)
	e.close(ss)
}

// span writes a Span as field 2 of a ScopeSpans.
func (e *encoder) span(s sdktrace.ReadOnlySpan) {
	m := e.open(2)
	sc, parent := s.SpanContext(), s.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	e.bytes(1, tid[:])
	e.bytes(2, sid[:])
	e.str(3, sc.TraceState().String())
	if psid := parent.SpanID(); psid.IsValid() {
		e.bytes(4, psid[:])
	}
	e.str(5, s.Name())
	e.varint(6, uint64(spanKind(s.SpanKind())))
	e.fixed64(7, unixNano(s.StartTime().UnixNano()))
	e.fixed64(8, unixNano(s.EndTime().UnixNano()))
	e.keyValues(9, s.Attributes())
	e.varint(10, count(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		m := e.open(11) // Event: time 1, name 2, attributes 3, dropped 4
		e.fixed64(1, unixNano(ev.Time.UnixNano()))
		e.str(2, ev.Name)
		e.keyValues(3, ev.Attributes)
		e.varint(4, count(ev.DroppedAttributeCount))
		e.close(m)
	}
	e.varint(12, count(s.DroppedEvents()))
	for _, l := range s.Links() {
		m := e.open(13) // Link: trace 1, span 2, state 3, attributes 4, dropped 5, flags 6
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		e.bytes(1, ltid[:])
		e.bytes(2, lsid[:])
		e.str(3, l.SpanContext.TraceState().String())
		e.keyValues(4, l.Attributes)
		e.varint(5, count(l.DroppedAttributeCount))
		e.fixed32(6, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		e.close(m)
	}
	e.varint(14, count(s.DroppedLinks()))
	st := e.open(15) // Status: message 2, code 3; written even when unset
	status := s.Status()
	e.str(2, status.Description)
	e.varint(3, statusCode(status.Code))
	e.close(st)
	e.fixed32(16, spanFlags(sc.TraceFlags(), parent))
	e.close(m)
}

// spanKind is the OTLP SpanKind: the SDK's numbers are the same, and
// anything unknown is UNSPECIFIED (0).
func spanKind(k trace.SpanKind) trace.SpanKind {
	if k < trace.SpanKindInternal || k > trace.SpanKindConsumer {
		return trace.SpanKindUnspecified
	}
	return k
}

// statusCode is the OTLP StatusCode: UNSET 0, OK 1, ERROR 2 (the SDK
// numbers Error 1 and Ok 2).
func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	default:
		return 0
	}
}

// spanFlags are the W3C trace flags, with the bits that say whether the
// parent was remote (SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK 0x100, and
// SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK 0x200 when it was).
func spanFlags(f trace.TraceFlags, parent trace.SpanContext) uint32 {
	flags := uint32(f) | 0x100
	if parent.IsRemote() {
		flags |= 0x200
	}
	return flags
}

func unixNano(n int64) uint64 {
	return uint64(max(0, n))
}

func count(n int) uint64 {
	return uint64(min(max(0, n), math.MaxUint32))
}
