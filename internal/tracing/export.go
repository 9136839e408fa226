package tracing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The span exporter is the SDK's otlptracehttp: OTLP over HTTP with
// protobuf. FromEnv reads its variables here rather than letting the SDK
// read the environment, so that a value it cannot honour stops the program
// at start, naming the variable, where the SDK would ignore it (the traces'
// own, OTEL_EXPORTER_OTLP_TRACES_*, before the general OTEL_EXPORTER_OTLP_*):
//   - _HEADERS: key=value pairs separated by commas, values percent-encoded,
//     sent with every export;
//   - _TIMEOUT: milliseconds an export may take, its retries included
//     (10000);
//   - _COMPRESSION: gzip or none (none);
//   - _CERTIFICATE: a PEM file of the certificates that the collector's is
//     checked against (the system's otherwise); _CLIENT_CERTIFICATE and
//     _CLIENT_KEY: PEM files of the certificate and key this program shows
//     it.
//
// An answer of 429, 502, 503 or 504, or no answer, is tried again after
// its Retry-After or a growing pause, until the timeout; any other failure
// drops the batch at once, as does a partial success (spans the collector
// took, then rejected). Either way the error reaches the SDK's handler,
// which Start points at the program's log.
//
// Around the SDK's exporter, two things it does not do:
//   - a span whose text is not valid UTF-8 (a client's User-Agent, say) is
//     sent with U+FFFD in place of the bad bytes: protobuf's strings must be
//     UTF-8, and the SDK's exporter drops the whole batch for one bad string;
//   - a user and password in the endpoint's URL are sent as the Basic
//     Authorization header that Go's client would send for them (the SDK
//     keeps only the URL's host and path), and never appear in an error.

// Defaults and bounds of the exporter.
const (
	defaultExportTimeout = 10 * time.Second
	firstRetryPause      = 250 * time.Millisecond
	longestRetryPause    = 5 * time.Second
)

// The exporter's variables in their general form. Each also has a form for
// traces alone (OTEL_EXPORTER_OTLP_TRACES_HEADERS, ...), which wins.
const (
	EnvHeaders           = "OTEL_EXPORTER_OTLP_HEADERS"
	EnvTimeout           = "OTEL_EXPORTER_OTLP_TIMEOUT"
	EnvCompression       = "OTEL_EXPORTER_OTLP_COMPRESSION"
	EnvCertificate       = "OTEL_EXPORTER_OTLP_CERTIFICATE"
	EnvClientCertificate = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
	EnvClientKey         = "OTEL_EXPORTER_OTLP_CLIENT_KEY"
)

// exportSettings are what the OTEL_EXPORTER_OTLP_* variables say about how
// spans are sent.
type exportSettings struct {
	headers http.Header
	timeout time.Duration
	gzip    bool
	tls     *tls.Config
}

// exportFromEnv reads the exporter's variables. Each error names the
// variable whose value it cannot use.
func exportFromEnv(getenv func(string) string) (exportSettings, []error) {
	var errs []error
	lookup := func(general string) (name, value string) {
		traces := strings.Replace(general, "OTEL_EXPORTER_OTLP_", "OTEL_EXPORTER_OTLP_TRACES_", 1)
		for _, name := range []string{traces, general} {
			if v := strings.TrimSpace(getenv(name)); v != "" {
				return name, v
			}
		}
		return "", ""
	}
	s := exportSettings{headers: http.Header{}, timeout: defaultExportTimeout}

	if name, v := lookup(EnvHeaders); v != "" {
		for pair := range strings.SplitSeq(v, ",") {
			key, value, ok := strings.Cut(pair, "=")
			k, kErr := url.PathUnescape(strings.TrimSpace(key))
			val, vErr := url.PathUnescape(strings.TrimSpace(value))
			if !ok || k == "" || kErr != nil || vErr != nil {
				errs = append(errs, fmt.Errorf("%s must be key=value pairs separated by commas, values percent-encoded; %q is not one", name, strings.TrimSpace(pair)))
				continue
			}
			s.headers.Set(k, val)
		}
	}
	if name, v := lookup(EnvTimeout); v != "" {
		ms, err := strconv.ParseUint(v, 10, 31)
		if err != nil || ms == 0 {
			errs = append(errs, fmt.Errorf("%s must be a number of milliseconds above 0, got %q", name, v))
		} else {
			s.timeout = time.Duration(ms) * time.Millisecond
		}
	}
	if name, v := lookup(EnvCompression); v != "" {
		switch v {
		case "gzip":
			s.gzip = true
		case "none":
		default:
			errs = append(errs, fmt.Errorf("%s must be gzip or none, got %q", name, v))
		}
	}

	var cfg tls.Config
	if name, file := lookup(EnvCertificate); file != "" {
		pem, err := os.ReadFile(file)
		pool := x509.NewCertPool()
		if err == nil && !pool.AppendCertsFromPEM(pem) {
			err = errors.New("no PEM certificate in it")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", name, file, err))
		} else {
			cfg.RootCAs = pool
		}
	}
	certName, certFile := lookup(EnvClientCertificate)
	keyName, keyFile := lookup(EnvClientKey)
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s and %s: %w", certName, keyName, err))
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	case certFile != "":
		errs = append(errs, fmt.Errorf("%s is set without %s (or its TRACES_ form)", certName, EnvClientKey))
	case keyFile != "":
		errs = append(errs, fmt.Errorf("%s is set without %s (or its TRACES_ form)", keyName, EnvClientCertificate))
	}
	if cfg.RootCAs != nil || cfg.Certificates != nil {
		cfg.MinVersion = tls.VersionTLS12
		s.tls = &cfg
	}
	return s, errs
}

// newExporter sends to endpoint as s says; what s leaves at zero (Settings
// built by hand rather than by FromEnv) takes the defaults.
func newExporter(ctx context.Context, endpoint string, s exportSettings) (sdktrace.SpanExporter, error) {
	if s.timeout <= 0 {
		s.timeout = defaultExportTimeout
	}
	headers := map[string]string{}
	for k, v := range s.headers {
		headers[k] = strings.Join(v, ",")
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("tracing: endpoint: %w", err)
	}
	if u.User != nil {
		if _, set := headers["Authorization"]; !set {
			password, _ := u.User.Password()
			headers["Authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+password))
		}
		u.User = nil
	}
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(u.String()),
		otlptracehttp.WithHeaders(headers),
		otlptracehttp.WithTimeout(s.timeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: firstRetryPause,
			MaxInterval: longestRetryPause, MaxElapsedTime: s.timeout}),
		otlptracehttp.WithCompression(otlptracehttp.NoCompression),
	}
	if s.gzip {
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	}
	if s.tls != nil {
		opts = append(opts, otlptracehttp.WithTLSClientConfig(s.tls))
	}
	e, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	return &validUTF8{next: e}, nil
}

// validUTF8 hands the SDK's exporter spans whose text is valid UTF-8, and
// drops batches quietly once shut down (the SDK's batcher sends none then;
// a late caller gets no error for it).
type validUTF8 struct {
	next    sdktrace.SpanExporter
	stopped atomic.Bool
}

// ExportSpans replaces each span that holds invalid UTF-8 with a copy that
// does not; the others go as they are, with nothing copied.
func (v *validUTF8) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if v.stopped.Load() {
		return nil
	}
	var clean []sdktrace.ReadOnlySpan // spans, copied on the first bad one
	for i, s := range spans {
		if spanIsValid(s) {
			if clean != nil {
				clean = append(clean, s)
			}
			continue
		}
		if clean == nil {
			clean = append(make([]sdktrace.ReadOnlySpan, 0, len(spans)), spans[:i]...)
		}
		clean = append(clean, sanitize(s))
	}
	if clean != nil {
		spans = clean
	}
	return v.next.ExportSpans(ctx, spans)
}

// Shutdown stops the exporter; later batches are dropped.
func (v *validUTF8) Shutdown(ctx context.Context) error {
	v.stopped.Store(true)
	return v.next.Shutdown(ctx)
}

func spanIsValid(s sdktrace.ReadOnlySpan) bool {
	if !utf8.ValidString(s.Name()) || !utf8.ValidString(s.Status().Description) || !attrsAreValid(s.Attributes()) {
		return false
	}
	for _, e := range s.Events() {
		if !utf8.ValidString(e.Name) || !attrsAreValid(e.Attributes) {
			return false
		}
	}
	for _, l := range s.Links() {
		if !attrsAreValid(l.Attributes) {
			return false
		}
	}
	return true
}

func attrsAreValid(kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		if !utf8.ValidString(string(kv.Key)) {
			return false
		}
		switch kv.Value.Type() {
		case attribute.STRING:
			if !utf8.ValidString(kv.Value.AsString()) {
				return false
			}
		case attribute.STRINGSLICE:
			for _, s := range kv.Value.AsStringSlice() {
				if !utf8.ValidString(s) {
					return false
				}
			}
		}
	}
	return true
}

// cleanSpan is a span with its text made valid; the rest is the span's own.
type cleanSpan struct {
	sdktrace.ReadOnlySpan
	name   string
	status sdktrace.Status
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	links  []sdktrace.Link
}

func (c cleanSpan) Name() string                     { return c.name }
func (c cleanSpan) Status() sdktrace.Status          { return c.status }
func (c cleanSpan) Attributes() []attribute.KeyValue { return c.attrs }
func (c cleanSpan) Events() []sdktrace.Event         { return c.events }
func (c cleanSpan) Links() []sdktrace.Link           { return c.links }

func sanitize(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	c := cleanSpan{ReadOnlySpan: s, name: validText(s.Name()), status: s.Status(), attrs: validAttrs(s.Attributes())}
	c.status.Description = validText(c.status.Description)
	for _, e := range s.Events() {
		e.Name, e.Attributes = validText(e.Name), validAttrs(e.Attributes)
		c.events = append(c.events, e)
	}
	for _, l := range s.Links() {
		l.Attributes = validAttrs(l.Attributes)
		c.links = append(c.links, l)
	}
	return c
}

func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func validAttrs(kvs []attribute.KeyValue) []attribute.KeyValue {
	if kvs == nil {
		return nil
	}
	out := make([]attribute.KeyValue, len(kvs))
	for i, kv := range kvs {
		kv.Key = attribute.Key(validText(string(kv.Key)))
		switch kv.Value.Type() {
		case attribute.STRING:
			kv.Value = attribute.StringValue(validText(kv.Value.AsString()))
		case attribute.STRINGSLICE:
			ss := kv.Value.AsStringSlice()
			for j := range ss {
				ss[j] = validText(ss[j])
			}
			kv.Value = attribute.StringSliceValue(ss)
		}
		out[i] = kv
	}
	return out
}
