package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The span exporter: OTLP over HTTP with protobuf, as the SDK's otlptracehttp
// exporter speaks it and configured by the same variables, but writing the
// protobuf itself (wire.go). It is written here for what that costs: the
// SDK's exporter spent more on turning a create's two spans into protobuf
// than the rest of tracing did on recording them (docs/benchmarks.md).
//
// The variables (the traces' own, OTEL_EXPORTER_OTLP_TRACES_*, before the
// general OTEL_EXPORTER_OTLP_*), read by FromEnv:
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
// drops the batch at once. Either way the error reaches the SDK's handler,
// which Start points at the program's log.

// Defaults and bounds of the exporter.
const (
	defaultExportTimeout = 10 * time.Second
	firstRetryPause      = 250 * time.Millisecond
	longestRetryPause    = 5 * time.Second
	// maxAnswer is how much of a collector's answer is read.
	maxAnswer = 64 << 10
	// maxQuoted is how much of a failed answer's body an error quotes.
	maxQuoted = 256

	contentTypeProtobuf = "application/x-protobuf"
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

// exporter sends the SDK's batches of spans to one OTLP/HTTP endpoint.
type exporter struct {
	url string
	// shown is url as errors give it: a password in it is left out.
	shown    string
	client   *http.Client
	settings exportSettings
	stopped  atomic.Bool

	// mu is held through an export: the SDK's batcher exports one batch
	// at a time, and the encoder's and the compressor's buffers are reused.
	mu  sync.Mutex
	enc encoder
	zw  *gzip.Writer
	zb  bytes.Buffer
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

// newExporter sends to endpoint as s says; what s leaves at zero (Settings
// built by hand rather than by FromEnv) takes the defaults.
func newExporter(endpoint string, s exportSettings) *exporter {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if s.tls != nil {
		transport.TLSClientConfig = s.tls
	}
	if s.timeout <= 0 {
		s.timeout = defaultExportTimeout
	}
	headers := make(http.Header, len(s.headers)+3)
	maps.Copy(headers, s.headers)
	s.headers = headers
	s.headers.Set("Content-Type", contentTypeProtobuf)
	s.headers.Set("User-Agent", "payments-otlp-exporter/1 (OTLP/HTTP protobuf)")
	if s.gzip {
		s.headers.Set("Content-Encoding", "gzip")
	}
	shown := endpoint
	if u, err := url.Parse(endpoint); err == nil {
		shown = u.Redacted()
	}
	return &exporter{url: endpoint, shown: shown, client: &http.Client{Transport: transport}, settings: s}
}

// ExportSpans sends spans in one request. It gives up when ctx ends or the
// timeout passes, and drops the batch: the SDK's batcher goes on with the
// next one.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 || e.stopped.Load() {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	body := e.enc.request(spans)
	if e.settings.gzip {
		e.zb.Reset()
		if e.zw == nil {
			e.zw = gzip.NewWriter(&e.zb)
		} else {
			e.zw.Reset(&e.zb)
		}
		if _, err := e.zw.Write(body); err != nil {
			return fmt.Errorf("otlp: compress %d spans: %w", len(spans), err)
		}
		if err := e.zw.Close(); err != nil {
			return fmt.Errorf("otlp: compress %d spans: %w", len(spans), err)
		}
		body = e.zb.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.settings.timeout)
	defer cancel()

	pause := firstRetryPause
	for attempt := 1; ; attempt++ {
		retryAfter, err := e.post(ctx, body)
		if err == nil {
			return nil
		}
		if retryAfter < 0 {
			return fmt.Errorf("otlp: %d spans to %s: %w", len(spans), e.shown, err)
		}
		if retryAfter == 0 {
			retryAfter, pause = pause, min(2*pause, longestRetryPause)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < retryAfter {
			return fmt.Errorf("otlp: %d spans to %s, given up after %d attempt(s) within the export timeout: %w", len(spans), e.shown, attempt, err)
		}
		t := time.NewTimer(retryAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("otlp: %d spans to %s, given up after %d attempt(s): %w", len(spans), e.shown, attempt, err)
		case <-t.C:
		}
	}
}

// post sends body once. It returns nil when the collector took it; else
// the error, and -1 when trying again cannot help, or how long to wait
// before trying again (0: as long as the exporter's own pause).
func (e *exporter) post(ctx context.Context, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	req.Header = e.settings.headers.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		var unknownCert *tls.CertificateVerificationError
		if ctx.Err() != nil || errors.As(err, &unknownCert) {
			return -1, err // trying again would end the same way
		}
		return 0, err // the collector is down or restarting
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, fmt.Errorf("reading the collector's answer (%s): %w", resp.Status, err)
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if strings.HasPrefix(resp.Header.Get("Content-Type"), contentTypeProtobuf) {
			if rejected, msg := partialSuccess(answer); rejected != 0 || msg != "" {
				return -1, fmt.Errorf("the collector rejected %d span(s): %s", rejected, quote(msg))
			}
		}
		return 0, nil
	case code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		wait := time.Duration(0)
		if s, err := strconv.ParseUint(strings.TrimSpace(resp.Header.Get("Retry-After")), 10, 16); err == nil {
			wait = time.Duration(s) * time.Second
		}
		return wait, fmt.Errorf("the collector answered %s: %s", resp.Status, quote(string(answer)))
	default:
		return -1, fmt.Errorf("the collector answered %s: %s", resp.Status, quote(string(answer)))
	}
}

// partialSuccess reads an ExportTraceServiceResponse's partial_success (1):
// rejected_spans (1) and error_message (2).
func partialSuccess(b []byte) (rejected int64, msg string) {
	eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) {
		if num != 1 || typ != protowire.BytesType {
			return
		}
		inner, _ := protowire.ConsumeBytes(v)
		eachField(inner, func(num protowire.Number, typ protowire.Type, v []byte) {
			switch {
			case num == 1 && typ == protowire.VarintType:
				n, _ := protowire.ConsumeVarint(v)
				rejected = int64(n) // two's complement, as protobuf's int64 is
			case num == 2 && typ == protowire.BytesType:
				msg, _ = protowire.ConsumeString(v)
			}
		})
	})
	return rejected, msg
}

// eachField calls fn with each field of the protobuf message b (its value
// with its length, if it has one), and stops at the first it cannot read.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, value []byte)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return
		}
		fn(num, typ, b[:n])
		b = b[n:]
	}
}

// quote is s for an error message: trimmed, cut to maxQuoted bytes,
// "(empty)" when there is nothing.
func quote(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "(empty)"
	}
	if len(s) > maxQuoted {
		s = strings.ToValidUTF8(s[:maxQuoted], "") + "…"
	}
	return strconv.Quote(s)
}

// Shutdown stops the exporter: later batches are dropped. The SDK calls it
// after the last batch has gone.
func (e *exporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return nil
}
