package apptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	openapierrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
	"github.com/pb33f/libopenapi-validator/paths"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"

	"github.com/idemkeys/payments/api"
)

// The API's answers are checked against the OpenAPI document it serves
// (api/swagger.json) by a third-party validator, pb33f/libopenapi-validator:
// every answer of an API that Start serves (on the server side, whoever the
// client is: apptest's requests, the Go client, a browser) and every answer
// that Do reads from an API that StartBinary runs. A status, content type,
// member or header the document does not state, or a header it promises
// that is missing, fails the test that started the API. A method that a
// path of the document is not served with must be answered 405 with Allow
// naming the document's methods for the path (or 401 under /v1), as every
// operation of the path declares; a path in no route, 404.
//
// On top of the document the check holds the API to one spelling of each
// media type (application/json, application/problem+json, without
// parameters), and to Retry-After on every problem whose code asks the
// client to come back later.
//
// Requests are checked too, against the same document, and against the
// answer they got: a request the document forbids (a member missing, a
// value out of its schema, a body not declared as application/json, a
// header that breaks its pattern) must be refused, and a request the
// document allows must not be refused as invalid (400 validation_failed or
// 415), unless every field refused is one of the operation's
// x-validation-rules, the rules JSON Schema cannot state. A request is
// checked with the body the API read; one whose body it did not read to the
// end (a refusal before reading, such as a 413) is checked without it.
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
	// rules are the x-validation-rules of each operation, by "METHOD /route".
	rules map[string][]ValidationRule
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
	rules, err := ValidationRules()
	if err != nil {
		return nil, err
	}
	c := &specChecker{validator: v, model: &model.Model, opts: config.NewValidationOptions(opts...), rules: rules}
	if name := os.Getenv("APPTEST_SPEC_LOG"); name != "" {
		if c.log, err = os.OpenFile(name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return nil, err
		}
	}
	return c, nil
})

// ValidationRule is one entry of an operation's x-validation-rules: a rule
// the API applies that JSON Schema cannot state.
type ValidationRule struct {
	In    string `json:"in"`
	Field string `json:"field"`
	Rule  string `json:"rule"`
	Code  string `json:"code"`
}

// ValidationRules reads every operation's x-validation-rules from the
// document, by "METHOD /route" (POST /v1/orders).
func ValidationRules() (map[string][]ValidationRule, error) {
	var doc struct {
		Paths map[string]map[string]struct {
			Rules []ValidationRule `json:"x-validation-rules"`
		}
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		return nil, err
	}
	out := map[string][]ValidationRule{}
	for path, item := range doc.Paths {
		for method, op := range item {
			if len(op.Rules) > 0 {
				out[strings.ToUpper(method)+" "+path] = op.Rules
			}
		}
	}
	return out, nil
}

// sentBody is a request's body as the API read it.
type sentBody struct {
	data []byte
	// whole: the API read it to its end (or there was none).
	whole bool
}

// checkAndLog is checkExchange and checkRequest for an answer the API gave:
// it also appends the exchange to APPTEST_SPEC_LOG.
func checkAndLog(req *http.Request, sent sentBody, status int, header http.Header, body []byte) []string {
	route, problems := checkExchange(req, status, header, body)
	if more := checkRequest(req, sent, status, body); more != nil {
		if problems == nil {
			problems = []string{fmt.Sprintf("%s %s answered %d (%s) against api/swagger.json:", req.Method, req.URL.RequestURI(), status, header.Get("Content-Type"))}
		}
		problems = append(problems, more...)
	}
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
	served := servedWith(pathItem, findErrs)
	var errs []string
	if pathItem != nil && (len(findErrs) == 0 || len(served) > 0) {
		checked := req
		if len(served) > 0 {
			// A method the path is not served with: its answer (405, or
			// 401 under /v1) is one that every operation of the path
			// declares, so it is checked as the first one's.
			checked = req.Clone(req.Context())
			checked.Method = served[0]
			resp.Request = checked
		}
		if ok, verrs := c.validator.ValidateHttpResponse(checked, resp); !ok {
			for _, e := range verrs {
				errs = append(errs, describe(e))
			}
		}
	}
	c.mu.Unlock()
	problems = append(problems, errs...)

	mediaType := header.Get("Content-Type")
	switch {
	case len(served) > 0:
		v1 := req.URL.Path == "/v1" || strings.HasPrefix(req.URL.Path, "/v1/")
		switch {
		case status == http.StatusMethodNotAllowed:
			if allow := methodSet(strings.Split(header.Get("Allow"), ",")); !slices.Equal(allow, methodSet(served)) {
				problems = append(problems, fmt.Sprintf("Allow %q on a 405; the document serves %s with %v", header.Get("Allow"), route, served))
			}
		case status == http.StatusUnauthorized && v1:
		default:
			problems = append(problems, fmt.Sprintf("%s %s: the document serves the path with %v only, and the answer is %d, not 405 (or 401 under /v1)", req.Method, req.URL.Path, served, status))
		}
		if mediaType != "application/problem+json" {
			problems = append(problems, fmt.Sprintf("Content-Type %q on a %d; problems are application/problem+json", mediaType, status))
		}
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

// servedWith is the methods, upper case, that the document serves a path
// with when FindPath found the path but not the request's method; nil
// otherwise.
func servedWith(item *v3.PathItem, findErrs []*openapierrors.ValidationError) []string {
	if item == nil || len(findErrs) != 1 || findErrs[0].ValidationSubType != helpers.ValidationMissingOperation {
		return nil
	}
	var methods []string
	for pair := orderedmap.First(item.GetOperations()); pair != nil; pair = pair.Next() {
		methods = append(methods, strings.ToUpper(pair.Key()))
	}
	return methods
}

// methodSet is a list of methods, trimmed and sorted.
func methodSet(methods []string) []string {
	out := make([]string, 0, len(methods))
	for _, m := range methods {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// The problem codes that refuse a request for what it is, not for the
// state it meets: a request the document forbids must get one of these (or
// another refusal: 401, 404, 413, …), and one it allows must not get the
// first two unless an x-validation-rule says why.
const (
	codeValidationFailed = "validation_failed"
	codeUnsupportedMedia = "unsupported_media_type"
)

// accepted reports whether status (with the problem code of body) means the
// API took the request as valid and acted on it, or judged it on its merits:
// a success, a decline, a business conflict, a version mismatch.
func accepted(status int, body []byte) bool {
	switch status {
	case http.StatusPaymentRequired, http.StatusPreconditionFailed:
		return true
	case http.StatusConflict:
		switch problemCode(body) {
		case "idempotency_request_in_progress", "idempotency_key_expired", "payment_in_progress":
			return false
		}
		return true
	}
	return status < 400
}

// checkRequest returns what is wrong with answering req, whose body the API
// read as sent, with status and body: a request the document forbids that
// was accepted, or one it allows that was refused as invalid.
func checkRequest(req *http.Request, sent sentBody, status int, body []byte) []string {
	if specExempt(req.URL.Path) || status == 499 {
		return nil
	}
	c, err := loadSpec()
	if err != nil {
		return []string{err.Error()}
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(sent.data))
	r.ContentLength = int64(len(sent.data))
	c.mu.Lock()
	pathItem, findErrs, route := paths.FindPath(r, c.model, c.opts)
	var verrs []*openapierrors.ValidationError
	if pathItem != nil && len(findErrs) == 0 {
		_, verrs = c.validator.ValidateHttpRequestSyncWithPathItem(r, pathItem, route)
	}
	c.mu.Unlock()
	if pathItem == nil || len(findErrs) > 0 {
		return nil // no operation: checkExchange wants the 404
	}
	var reasons []string
	for _, e := range verrs {
		if !sent.whole && e.ValidationType == helpers.RequestBodyValidation && e.ValidationSubType != helpers.RequestBodyContentType {
			continue // the body was not read whole: it cannot be judged
		}
		reasons = append(reasons, describe(e))
	}
	code := problemCode(body)
	refusedAsInvalid := status == http.StatusUnsupportedMediaType ||
		(status == http.StatusBadRequest && code == codeValidationFailed)
	switch {
	case len(reasons) > 0 && accepted(status, body):
		return append([]string{fmt.Sprintf("the document forbids this request, but the API accepted it with %d:", status)}, reasons...)
	case len(reasons) == 0 && refusedAsInvalid && sent.whole:
		if status == http.StatusBadRequest && c.explained(req.Method+" "+route, body) {
			return nil
		}
		return []string{fmt.Sprintf("the document allows this request (body %s), but the API refused it with %d %s, and no x-validation-rule of the operation says why", truncate(sent.data), status, code)}
	}
	return nil
}

// explained reports whether every field a validation problem refuses is
// one of the operation's x-validation-rules (a rule of field "" covers the
// body as a whole, and a problem that names no field).
func (c *specChecker) explained(op string, body []byte) bool {
	var p struct {
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &p) != nil {
		return false
	}
	covers := func(field string) bool {
		for _, r := range c.rules[op] {
			if r.Field == field || (r.Field != "" && (strings.HasPrefix(field, r.Field+".") || strings.HasPrefix(field, r.Field+"["))) {
				return true
			}
		}
		return false
	}
	if len(p.Errors) == 0 {
		return covers("")
	}
	for _, e := range p.Errors {
		if !covers(e.Field) {
			return false
		}
	}
	return true
}

// bodyRecorder passes a request body through and keeps what was read.
type bodyRecorder struct {
	io.ReadCloser
	buf   bytes.Buffer
	whole bool
}

// maxRecordedBody bounds what the check keeps of a body; a larger one is
// judged without its body. The validator's time grows with the body (a
// 900 KB order of 300,000 items takes it seconds, long enough for the
// server's write timeout), and the bodies that large are the hostile ones,
// whose answers the tests check themselves.
const maxRecordedBody = 64 << 10

// sentWhole is a body the client sent whole, judged with it unless it is
// over maxRecordedBody.
func sentWhole(data []byte) sentBody {
	if len(data) > maxRecordedBody {
		return sentBody{}
	}
	return sentBody{data: data, whole: true}
}

func (b *bodyRecorder) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.buf.Len() <= maxRecordedBody {
		b.buf.Write(p[:n])
	}
	if errors.Is(err, io.EOF) {
		b.whole = b.buf.Len() <= maxRecordedBody
	}
	return n, err
}

func (b *bodyRecorder) sent() sentBody {
	return sentBody{data: b.buf.Bytes(), whole: b.whole}
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
			body := &bodyRecorder{ReadCloser: r.Body, whole: r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0}
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = body
			}
			rec := &specRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			if rec.status == 0 || stopped() {
				return
			}
			if problems := checkAndLog(req, body.sent(), rec.status, rec.header, rec.body.Bytes()); problems != nil {
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

// checkAnswer checks an answer Do read, and the request that got it, when
// it came from an API that StartBinary runs.
func checkAnswer(req *http.Request, sent sentBody, a Answer) {
	v, ok := binaries.Load(req.URL.Host)
	if !ok {
		return
	}
	b := v.(*binaryAPI)
	if isGoPlainText(a) {
		return
	}
	problems := checkAndLog(req, sent, a.Status, a.Header, a.Body)
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
	checkAnswer(req, sentOf(req), Answer{Status: resp.StatusCode, Header: resp.Header, Body: body})
	return resp, nil
}

// sentOf is the body a client request carried, read again through GetBody
// (set for the bodies http.NewRequest knows); not whole when it cannot be.
func sentOf(req *http.Request) sentBody {
	if req.Body == nil || req.Body == http.NoBody {
		return sentBody{whole: true}
	}
	if req.GetBody == nil {
		return sentBody{}
	}
	rc, err := req.GetBody()
	if err != nil {
		return sentBody{}
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxRecordedBody+1))
	if err != nil {
		return sentBody{}
	}
	return sentWhole(data)
}

// ValidateRequest returns what the document finds wrong with req sent with
// body (nil: nothing), for a test that generates requests and must know
// which the document allows.
func ValidateRequest(req *http.Request, body []byte) ([]string, error) {
	c, err := loadSpec()
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	c.mu.Lock()
	defer c.mu.Unlock()
	pathItem, findErrs, route := paths.FindPath(r, c.model, c.opts)
	if pathItem == nil || len(findErrs) > 0 {
		return []string{"no operation of the document"}, nil
	}
	_, verrs := c.validator.ValidateHttpRequestSyncWithPathItem(r, pathItem, route)
	var reasons []string
	for _, e := range verrs {
		reasons = append(reasons, describe(e))
	}
	return reasons, nil
}

// Explained reports whether every field that a 400 validation_failed
// answer to the operation (METHOD /route) refuses is one of its
// x-validation-rules.
func Explained(op string, answer []byte) bool {
	c, err := loadSpec()
	return err == nil && c.explained(op, answer)
}
