package apptest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	openapierrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/paths"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/idemkeys/payments/api"
)

// The API's answers are checked against the OpenAPI document it serves
// (api/swagger.json) by a third-party validator, pb33f/libopenapi-validator:
// every answer of an API that Start serves (on the server side, whoever the
// client is: apptest's requests, the Go client, a browser) and every answer
// that Do reads from an API that StartBinary runs. A status, content type,
// member or header the document does not state, or a header it promises
// that is missing, fails the test that started the API.
//
// On top of the document the check holds the API to one spelling of each
// media type (application/json, application/problem+json, without
// parameters), and to Retry-After on every problem whose code asks the
// client to come back later.
//
// Out of scope: /metrics, /swagger/*, /demo and the development mirror of
// the in-process provider, /dev/provider/* (not the payments API), Go's own
// plain-text answers before the program runs (a malformed request line,
// headers over the limit), and 499 (the client left; nothing is sent).
//
// Set APPTEST_SPEC_LOG to a file name to have every checked exchange
// appended to it as "METHOD /route STATUS", for counting coverage.

// specExempt reports whether path is served outside the document.
func specExempt(path string) bool {
	return path == "/metrics" || path == "/demo" || strings.HasPrefix(path, "/swagger/") || strings.HasPrefix(path, "/dev/provider/")
}

// retryLater are the problem codes that always carry Retry-After.
var retryLater = map[string]bool{
	"idempotency_request_in_progress": true,
	"payment_in_progress":             true,
	"rate_limited":                    true,
	"service_unavailable":             true,
}

type specChecker struct {
	validator validator.Validator
	model     *v3.Document
	opts      *config.ValidationOptions
	// mu serializes validations: the validator's caches are not
	// documented as safe for concurrent use.
	mu  sync.Mutex
	log *os.File
}

var loadSpec = sync.OnceValues(func() (*specChecker, error) {
	doc, err := libopenapi.NewDocument(api.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("read api/swagger.json: %w", err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build the OpenAPI model: %w", err)
	}
	opts := []config.Option{config.WithFormatAssertions()}
	v, errs := validator.NewValidator(doc, opts...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("validator: %w", errors.Join(errs...))
	}
	if ok, docErrs := v.ValidateDocument(); !ok {
		msgs := make([]string, len(docErrs))
		for i, e := range docErrs {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("api/swagger.json is not a valid OpenAPI document: %s", strings.Join(msgs, "; "))
	}
	c := &specChecker{validator: v, model: &model.Model, opts: config.NewValidationOptions(opts...)}
	if name := os.Getenv("APPTEST_SPEC_LOG"); name != "" {
		if c.log, err = os.OpenFile(name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return nil, err
		}
	}
	return c, nil
})

// checkAndLog is checkExchange for an answer the API gave: it also appends
// the exchange to APPTEST_SPEC_LOG.
func checkAndLog(req *http.Request, status int, header http.Header, body []byte) []string {
	route, problems := checkExchange(req, status, header, body)
	if c, err := loadSpec(); err == nil && c.log != nil && route != "" {
		c.mu.Lock()
		fmt.Fprintf(c.log, "%s %s %d\n", req.Method, route, status)
		c.mu.Unlock()
	}
	return problems
}

// checkExchange returns what is wrong with answering req (its body is not
// looked at) with status, header and body, or nil, and the document's route
// that req is on ("" when it is out of scope).
func checkExchange(req *http.Request, status int, header http.Header, body []byte) (string, []string) {
	if specExempt(req.URL.Path) || status == 499 {
		return "", nil
	}
	c, err := loadSpec()
	if err != nil {
		return "", []string{err.Error()}
	}
	resp := &http.Response{
		StatusCode: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req,
	}
	var problems []string
	c.mu.Lock()
	pathItem, findErrs, route := paths.FindPath(req, c.model, c.opts)
	var errs []string
	if pathItem != nil && len(findErrs) == 0 {
		if ok, verrs := c.validator.ValidateHttpResponse(req, resp); !ok {
			for _, e := range verrs {
				errs = append(errs, describe(e))
			}
		}
	}
	c.mu.Unlock()
	problems = append(problems, errs...)

	mediaType := header.Get("Content-Type")
	switch {
	case pathItem == nil || len(findErrs) > 0:
		// No route of the document: only the API's 404 (no such
		// endpoint) may answer it.
		if status != http.StatusNotFound || mediaType != "application/problem+json" {
			problems = append(problems, fmt.Sprintf("%s %s is in no route of the document, and was answered %d %q", req.Method, req.URL.Path, status, mediaType))
		}
		route = "(no route)"
	case status >= 400 && mediaType != "application/problem+json" && (route != "/readyz" || status != http.StatusServiceUnavailable):
		problems = append(problems, fmt.Sprintf("Content-Type %q on a %d; problems are application/problem+json", mediaType, status))
	case status < 400 && len(body) > 0 && mediaType != "application/json":
		problems = append(problems, fmt.Sprintf("Content-Type %q on a %d; success bodies are application/json, spelt so", mediaType, status))
	}
	if strings.HasPrefix(mediaType, "application/problem+json") {
		if code := problemCode(body); retryLater[code] && header.Get("Retry-After") == "" {
			problems = append(problems, fmt.Sprintf("a %d %s without Retry-After", status, code))
		}
	}
	if len(problems) > 0 {
		head := fmt.Sprintf("%s %s answered %d (%s) against api/swagger.json:", req.Method, req.URL.RequestURI(), status, mediaType)
		return route, append([]string{head}, problems...)
	}
	return route, nil
}

// describe is one validation error on one line: what, why, and where in
// the body (the instance path and the schema keyword).
func describe(e *openapierrors.ValidationError) string {
	parts := []string{e.Message}
	if e.Reason != "" {
		parts = append(parts, e.Reason)
	}
	for _, f := range e.SchemaValidationErrors {
		parts = append(parts, fmt.Sprintf("at %s: %s (%s)", f.FieldPath, f.Reason, f.KeywordLocation))
	}
	return strings.Join(parts, "; ")
}

// problemCode is the code member of a problem body, or "".
func problemCode(body []byte) string {
	const key = `"code":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return string(rest[:j])
	}
	return ""
}

// specRecorder keeps what a handler writes, passing it through.
type specRecorder struct {
	http.ResponseWriter
	status int
	header http.Header
	body   bytes.Buffer
}

func (r *specRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status, r.header = status, r.ResponseWriter.Header().Clone()
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *specRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (read
// deadlines, flushes).
func (r *specRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// checkServed wraps the program's handler so that every answer it gives
// is checked, and a wrong one fails t.
func checkServed(t testing.TB, stopped func() bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The request as it came: a handler may change its URL.
			req := r.Clone(r.Context())
			req.Body = http.NoBody
			rec := &specRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			if rec.status == 0 || stopped() {
				return
			}
			if problems := checkAndLog(req, rec.status, rec.header, rec.body.Bytes()); problems != nil {
				t.Errorf("%s\n\t%s\nbody: %s", problems[0], strings.Join(problems[1:], "\n\t"), truncate(rec.body.Bytes()))
			}
		})
	}
}

// binaries maps the host:port of each API that StartBinary runs to the
// test that started it, for Do's check.
var binaries sync.Map // string -> *binaryAPI

type binaryAPI struct {
	t       testing.TB
	mu      sync.Mutex
	stopped bool
}

func registerBinary(t testing.TB, addr string) {
	b := &binaryAPI{t: t}
	binaries.Store(addr, b)
	t.Cleanup(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		binaries.CompareAndDelete(addr, b)
	})
}

// checkAnswer checks an answer Do read, when it came from an API that
// StartBinary runs.
func checkAnswer(req *http.Request, a Answer) {
	v, ok := binaries.Load(req.URL.Host)
	if !ok {
		return
	}
	b := v.(*binaryAPI)
	if isGoPlainText(a) {
		return
	}
	problems := checkAndLog(req, a.Status, a.Header, a.Body)
	if problems == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		b.t.Errorf("%s\n\t%s\nbody: %s", problems[0], strings.Join(problems[1:], "\n\t"), truncate(a.Body))
	}
}

// isGoPlainText reports whether a is one of net/http's own answers to a
// request it could not read, sent before the program sees anything.
func isGoPlainText(a Answer) bool {
	return (a.Status == http.StatusBadRequest || a.Status == http.StatusRequestHeaderFieldsTooLarge) &&
		strings.HasPrefix(a.Header.Get("Content-Type"), "text/plain")
}

func truncate(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// SpecCoverage reads an APPTEST_SPEC_LOG file: how many exchanges were
// checked, and how many of each route and status.
func SpecCoverage(name string) (exchanges int, pairs map[string]int, err error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	pairs = map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		exchanges++
		pairs[sc.Text()]++
	}
	return exchanges, pairs, sc.Err()
}

// CheckedClient is an http.Client whose answers from an API that
// StartBinary runs are checked as Do checks them: for a test that talks to
// the binary its own way (a proxy in front of it, a client library).
func CheckedClient() *http.Client {
	return &http.Client{Transport: checkedTransport{http.DefaultTransport}}
}

type checkedTransport struct{ base http.RoundTripper }

func (c checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp, err
	}
	checkAnswer(req, Answer{Status: resp.StatusCode, Header: resp.Header, Body: body})
	return resp, nil
}
