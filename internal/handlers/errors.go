package handlers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/problem"
)

// requestError is a request this layer refuses before the domain sees it:
// a body that is not JSON or does not fit the DTO, a query parameter that
// does not parse.
type requestError struct {
	detail string
	fields []problem.FieldError
	// count is how many fields were refused, when more than fields lists
	// (MaxFieldErrors); zero means len(fields).
	count int
}

func (e *requestError) Error() string {
	parts := []string{"invalid request"}
	if e.detail != "" {
		parts = append(parts, e.detail)
	}
	for _, f := range e.fields {
		parts = append(parts, f.Field+" "+f.Message)
	}
	return strings.Join(parts, ": ")
}

// errNoRoute answers a path no route matches.
var errNoRoute = errors.New("no route")

// methodNotAllowedError answers a method that no route of the path serves;
// allow lists the methods its routes do serve ("GET, POST").
type methodNotAllowedError struct{ allow string }

func (e *methodNotAllowedError) Error() string { return "method not allowed; allowed: " + e.allow }

// errInvalidSignature refuses a provider webhook whose signature does not
// verify. The webhook handler wraps the verifier's reason with it; the
// reason is logged, never shown, so a forger learns nothing from the answer.
var errInvalidSignature = errors.New("invalid webhook signature")

// The error table. ErrorAnswer is the only place that maps errors to
// answers: handlers, the idempotency layer and middleware hand it their
// error. Each row says which errors it answers, with which problem, and
// whether that answer is kept: final, stored under the request's
// Idempotency-Key and replayed to every retry (the business conflicts), or
// not, so that the client may send the key again (a validation error, a
// conflict that clears, anything of ours). A decline or a cancel is not an
// error but an outcome, answered by answers.Payment and answers.Refund.
// The rows are tried in order, where errors can wrap each other: a body
// cut at the size limit is 413 whoever read it, and a lost database is 503
// whatever was being attempted. An error no row answers is a 500 whose
// cause is logged, never shown.
var errorTable = []errorRow{
	// The server's own answers, which net/http writes before any route
	// (GuardListener rewrites them): a request that never reached Gin.
	{match: is(errMalformedRequest), status: http.StatusBadRequest, code: problem.CodeMalformedRequest, title: "Malformed request",
		detail: "The request line or a header line is not valid HTTP/1.1 (or the Host header is missing); nothing was done."},
	{match: is(errHeaderTooLarge), status: http.StatusRequestHeaderFieldsTooLarge, code: problem.CodeRequestHeaderTooLarge, title: "Request header too large",
		detail: "The request's header block is larger than the server accepts (MAX_HEADER_BYTES); nothing was done."},
	{match: is(errNotImplemented), status: http.StatusNotImplemented, code: problem.CodeNotImplemented, title: "Not implemented",
		detail: "The request's Transfer-Encoding is not supported (only chunked is); nothing was done."},
	{match: is(errHTTPVersion), status: http.StatusHTTPVersionNotSupported, code: problem.CodeHTTPVersionNotSupported, title: "HTTP version not supported",
		detail: "The server speaks HTTP/1.0 and HTTP/1.1; nothing was done."},
	{match: is(errExpectationFailed), status: http.StatusExpectationFailed, code: problem.CodeExpectationFailed, title: "Expectation failed",
		detail: "The request's Expect header asks for something other than 100-continue, the one expectation the server meets; nothing was done."},
	{match: is(errTooManyConnections), status: http.StatusTooManyRequests, code: problem.CodeTooManyConnections, title: "Too many connections",
		retryAfter: time.Second,
		detail:     "Too many open connections from this address, or in all; nothing was done. Retry after the time in Retry-After, or reuse an open connection."},
	{match: as[*http.MaxBytesError], status: http.StatusRequestEntityTooLarge, code: problem.CodeRequestTooLarge, title: "Request too large",
		fill: func(err error, a *problemParts) {
			a.detail = fmt.Sprintf("The request body is larger than %d bytes.", asErr[*http.MaxBytesError](err).Limit)
		}},
	{match: is(errUnsupportedMediaType), status: http.StatusUnsupportedMediaType, code: problem.CodeUnsupportedMediaType, title: "Unsupported media type",
		detail: "A request body must be sent with Content-Type: application/json (charset=utf-8 is allowed); nothing was done. Send it again with that type, under the same Idempotency-Key if it has one."},
	{match: is(database.ErrUnavailable), status: http.StatusServiceUnavailable, code: problem.CodeServiceUnavailable, title: "Service unavailable",
		retryAfter: time.Second,
		detail:     "The database cannot be reached. Retry later with the same Idempotency-Key: an operation already under way resumes where it stopped, and nothing happens twice."},
	// A lock wait that ran past DB_LOCK_TIMEOUT (or a resource with too
	// many writes waiting already): the statement's transaction rolled
	// back, so nothing was done, and the holder will be done soon or ended
	// by the server (DB_IDLE_IN_TRANSACTION_TIMEOUT).
	{match: is(database.ErrBusy), status: http.StatusServiceUnavailable, code: problem.CodeServiceUnavailable, title: "Service unavailable",
		retryAfter: time.Second,
		detail:     "Another request holds what this one needs, for longer than the server waits; nothing was done. Retry after the time in Retry-After with the same Idempotency-Key."},
	{match: is(idempotency.ErrKeyMissing), status: http.StatusBadRequest, code: problem.CodeIdempotencyKeyMissing, title: "Idempotency key missing",
		detail: "This request needs an Idempotency-Key header: a unique value per operation, reused on every retry of it."},
	// The error says why (empty, too long, which character); it never
	// carries the key itself.
	{match: is(idempotency.ErrKeyInvalid), status: http.StatusBadRequest, code: problem.CodeIdempotencyKeyInvalid, title: "Idempotency key invalid",
		fill: func(err error, a *problemParts) { a.detail = oneLine(err) }},
	{match: is(idempotency.ErrKeyReused), status: http.StatusUnprocessableEntity, code: problem.CodeIdempotencyKeyReused, title: "Idempotency key reused",
		detail: "This Idempotency-Key was already used for a different request (other body, endpoint or path). Use a new key for a new operation."},
	{match: is(idempotency.ErrKeyExpired), status: http.StatusConflict, code: problem.CodeIdempotencyKeyExpired, title: "Idempotency key expired",
		detail: "This Idempotency-Key was used for this request longer ago than the keys are kept; nothing was done. If you mean to repeat the operation, send it with a new key."},
	{match: is(idempotency.ErrInProgress), status: http.StatusConflict, code: problem.CodeIdempotencyInProgress, title: "Request in progress",
		detail: "The original request with this Idempotency-Key is still running. Retry after the time in Retry-After to get its result.",
		fill: func(err error, a *problemParts) {
			a.header.Set("Retry-After", retryAfterSeconds(idempotency.RetryAfter(err)))
		}},
	{match: is(idempotency.ErrRateLimited), status: http.StatusTooManyRequests, code: problem.CodeRateLimited, title: "Rate limited",
		detail: "Too many new Idempotency-Keys from this merchant; nothing was done. Retry after the time in Retry-After. Retries of existing keys are never limited.",
		fill: func(err error, a *problemParts) {
			a.header.Set("Retry-After", retryAfterSeconds(idempotency.RetryAfter(err)))
		}},
	// Another request took this key's operation over while this one ran
	// (its lock had timed out): that request's answer is the one that will
	// be kept, so the client is sent to fetch it, as for a duplicate.
	{match: is(idempotency.ErrFenced), status: http.StatusConflict, code: problem.CodeIdempotencyInProgress, title: "Request in progress",
		retryAfter: time.Second,
		detail:     "Another request with this Idempotency-Key has taken this operation over. Retry after the time in Retry-After to get its result."},
	{match: is(idempotency.ErrMalformedBody), status: http.StatusBadRequest, code: problem.CodeValidationFailed, title: "Validation failed",
		fill: func(err error, a *problemParts) { a.detail = oneLine(err) }},
	{match: as[*payments.ValidationError], status: http.StatusBadRequest, code: problem.CodeValidationFailed, title: "Validation failed",
		fill: func(err error, a *problemParts) {
			invalid := asErr[*payments.ValidationError](err)
			a.validation("", toProblemFields(invalid.Fields), len(invalid.Fields))
		}},
	{match: as[*requestError], status: http.StatusBadRequest, code: problem.CodeValidationFailed, title: "Validation failed",
		fill: func(err error, a *problemParts) {
			bad := asErr[*requestError](err)
			a.validation(bad.detail, bad.fields, max(bad.count, len(bad.fields)))
		}},
	{match: as[*merchants.KeyBudgetError], status: http.StatusTooManyRequests, code: problem.CodeTooManyUnknownKeys, title: "Too many unknown API keys",
		detail: "Too many unknown API keys from this address; this one was not checked. Retry after the time in Retry-After. A known key is never limited.",
		fill: func(err error, a *problemParts) {
			a.header.Set("Retry-After", retryAfterSeconds(asErr[*merchants.KeyBudgetError](err).RetryAfter))
		}},
	{match: is(merchants.ErrUnauthorized), status: http.StatusUnauthorized, code: problem.CodeUnauthorized, title: "Unauthorized",
		detail: "Send a valid API key as Authorization: Bearer <key>.",
		fill:   func(_ error, a *problemParts) { a.header.Set("WWW-Authenticate", `Bearer realm="api"`) }},
	// The verifier's reason is logged, never shown: a forger learns nothing
	// from the answer.
	{match: is(errInvalidSignature), status: http.StatusUnauthorized, code: problem.CodeInvalidSignature, title: "Invalid signature",
		detail: "The Provider-Signature header is missing or malformed, does not match the body, or is older than 5 minutes."},
	{match: is(payments.ErrOrderAlreadyPaid), status: http.StatusConflict, code: problem.CodeOrderAlreadyPaid, title: "Order already paid", kept: true,
		detail: "The order is paid. Fetch the order to see its state."},
	// A conflict with a payment or refund in flight clears when it settles:
	// not kept, so the same key sent again after Retry-After runs again.
	{match: is(payments.ErrPaymentInProgress), status: http.StatusConflict, code: problem.CodePaymentInProgress, title: "Payment in progress",
		retryAfter: PaymentInProgressRetryAfter,
		detail:     "The order or payment has a payment or refund in flight; nothing was done. Retry after the time in Retry-After, with the same Idempotency-Key: this answer is not stored."},
	{match: is(payments.ErrCustomerExists), status: http.StatusConflict, code: problem.CodeCustomerExists, title: "Customer exists", kept: true,
		detail: "A customer with this email exists already for your account. Fetch it instead of creating it again."},
	{match: is(payments.ErrRefundExceedsPayment), status: http.StatusConflict, code: problem.CodeRefundExceedsPayment, title: "Refund exceeds payment", kept: true,
		detail: "The refund is larger than what is left to refund of the payment, or the payment has not succeeded."},
	{match: is(payments.ErrVersionMismatch), status: http.StatusPreconditionFailed, code: problem.CodeVersionMismatch, title: "Version mismatch",
		detail: "The order has changed since the version in If-Match; nothing was changed. Fetch it again (its ETag is the current version), decide again, and send the new ETag."},
	// A webhook event the provider could not be asked about: nothing was
	// applied, and the provider delivers it again.
	{match: is(payments.ErrProviderUnreachable), status: http.StatusServiceUnavailable, code: problem.CodeProviderUnavailable, title: "Provider unavailable",
		retryAfter: 5 * time.Second,
		detail:     "The payment provider could not be asked about this event, so nothing was applied. Deliver it again later."},
	{match: as[*payments.UnavailableError], status: http.StatusBadGateway, code: problem.CodeProviderUnavailable, title: "Provider unavailable",
		detail: fmt.Sprintf("The payment provider failed before doing anything; nothing was charged or refunded. Retry with the same Idempotency-Key: it resumes the same operation, until an attempt abandoned for %s is canceled.", PendingCancelAfterHint),
		fill: func(err error, a *problemParts) {
			if e := asErr[*payments.UnavailableError](err); e.RefundID != "" {
				a.extra = map[string]any{"refund_id": e.RefundID}
			} else {
				a.extra = map[string]any{"payment_id": e.PaymentID}
			}
		}},
	{match: is(payments.ErrProviderUnavailable), status: http.StatusBadGateway, code: problem.CodeProviderUnavailable, title: "Provider unavailable",
		detail: "The payment provider failed before doing anything; nothing was charged. Retry with the same Idempotency-Key: it resumes the same operation."},
	// Any endpoint's outside call that did nothing (idempotency.Effect.Run
	// returns it wrapped when no wrapper of the domain's names it): a
	// fork's receipt whose mail service answered 503 is answered like a
	// payment whose provider did, not as a 500.
	{match: is(idempotency.ErrNotExecuted), status: http.StatusBadGateway, code: problem.CodeProviderUnavailable, title: "Provider unavailable",
		detail: "The outside service failed before doing anything; nothing was done. Retry with the same Idempotency-Key: it resumes the same operation."},
	{match: is(payments.ErrNotFound), status: http.StatusNotFound, code: problem.CodeNotFound, title: "Not found",
		detail: "No resource with this id exists for your account."},
	// Only the key introspection route lets it through: the middleware
	// handles a missing record itself.
	{match: is(idempotency.ErrNotFound), status: http.StatusNotFound, code: problem.CodeNotFound, title: "Not found",
		detail: "No live record exists under this Idempotency-Key for your account: never used, expired, or given back after an answer that is not kept."},
	{match: is(errNoRoute), status: http.StatusNotFound, code: problem.CodeNotFound, title: "Not found",
		detail: "No endpoint matches this method and path."},
	// RFC 9110, 15.5.6: a 405 lists the methods the resource serves.
	{match: as[*methodNotAllowedError], status: http.StatusMethodNotAllowed, code: problem.CodeMethodNotAllowed, title: "Method not allowed",
		fill: func(err error, a *problemParts) {
			allow := asErr[*methodNotAllowedError](err).allow
			a.header.Set("Allow", allow)
			a.detail = fmt.Sprintf("This path is not served with this method; it is served with %s (the Allow header). Nothing was done.", allow)
		}},
	// A body that did not arrive within the read deadline: a slow or
	// stalled sender, answered as its fault, not ours.
	{match: bodyTimedOut, status: http.StatusRequestTimeout, code: problem.CodeRequestTimeout, title: "Request timeout",
		detail: "The request body did not arrive in time; nothing was done. Send it again, whole."},
}

// internalError answers an error no row of the table knows.
var internalError = errorRow{status: http.StatusInternalServerError, code: problem.CodeInternalError, title: "Internal error",
	detail: "Something went wrong on our side. Retry later with the same Idempotency-Key."}

// errorRow is one row of the error table.
type errorRow struct {
	// match says whether the row answers err.
	match func(err error) bool
	// status, code and title are the problem's; detail its fixed detail.
	status int
	code   string
	title  string
	detail string
	// kept: the answer is final, stored under the key and replayed.
	kept bool
	// retryAfter, when set, is the answer's fixed Retry-After.
	retryAfter time.Duration
	// fill sets what depends on the error: the detail, extension members,
	// headers.
	fill func(err error, a *problemParts)
}

// problemParts is a problem answer being built from a row.
type problemParts struct {
	detail string
	extra  map[string]any
	header http.Header
	fields []problem.FieldError
	count  int
}

// validation lists at most MaxFieldErrors refused fields, and the count of
// all when there are more (a lower bound when decoding stopped at a size
// limit).
func (a *problemParts) validation(detail string, fields []problem.FieldError, count int) {
	if detail == "" {
		detail = invalidFieldsDetail(count, len(fields) < count)
	}
	a.detail, a.fields, a.count = detail, fields[:min(len(fields), MaxFieldErrors)], count
}

// answer builds the row's answer to err.
func (r errorRow) answer(err error) idempotency.Answer {
	a := problemParts{detail: r.detail, header: http.Header{}}
	if r.retryAfter > 0 {
		a.header.Set("Retry-After", retryAfterSeconds(r.retryAfter))
	}
	if r.fill != nil {
		r.fill(err, &a)
	}
	p := problem.New(r.status, r.code, r.title, a.detail)
	p.Extra, p.Errors = a.extra, a.fields
	if a.count > len(a.fields) {
		p.ErrorCount = a.count
	}
	return answers.Problem(p, a.header, r.kept)
}

// errorAnswer is the table's answer to err, and false when no row knows
// err (the answer is then the 500's).
func errorAnswer(err error) (idempotency.Answer, bool) {
	for _, r := range errorTable {
		if r.match(err) {
			return r.answer(err), true
		}
	}
	return internalError.answer(err), false
}

// ErrorAnswer is the answer to err: a problem+json, final or not, as the
// table says. An error the table does not know is a 500 whose cause is
// logged with the request's logger, never shown; a client that has gone is
// answered StatusClientClosed, with no body. The idempotency layer answers
// its refusals and its handlers' errors with it (ginidem.Options.Answer).
func ErrorAnswer(c *gin.Context, err error) idempotency.Answer {
	if clientGone(c, err) {
		// Nobody reads this answer. It is no fault of ours: logged at info
		// and counted under StatusClientClosed, not as a 500.
		loggerFrom(c).InfoContext(c.Request.Context(), "client went away before the answer",
			"method", c.Request.Method, "route", c.FullPath(), "error", err)
		return idempotency.Answer{Status: StatusClientClosed}
	}
	a, known := errorAnswer(err)
	switch {
	case !known:
		loggerFrom(c).ErrorContext(c.Request.Context(), "internal error",
			"error", err, "method", c.Request.Method, "route", c.FullPath())
	case bodyTimedOut(err):
		loggerFrom(c).InfoContext(c.Request.Context(), "request body did not arrive in time",
			"method", c.Request.Method, "route", c.FullPath())
	}
	return a
}

// RenderError answers the request with ErrorAnswer(c, err) and aborts the
// handler chain: how middleware and routes without a key answer an error.
func RenderError(c *gin.Context, err error) {
	c.Abort()
	ginidem.Write(c, ErrorAnswer(c, err))
}

// Every handler returns its answer as a value (answers.JSON for a
// success), or an error that the error table turns into one; ginidem.Write
// is the one place that writes either. A keyed route's answer goes through
// the idempotency layer, which stores it when it is final; any other
// route's through Serve.

// Serve is a route without an Idempotency-Key: h's answer, or its error's,
// written as it is.
func Serve(h ginidem.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		a, err := h(c)
		if err != nil {
			RenderError(c, err)
			return
		}
		ginidem.Write(c, a)
	}
}

// is matches errors that are target, wrapped or not.
func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// as matches errors that wrap a T.
func as[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

// asErr returns the T that err wraps (the row matched it already).
func asErr[T error](err error) T {
	var t T
	errors.As(err, &t)
	return t
}

// StatusClientClosed is the status the access log and the metrics record
// for a request whose client hung up (or stopped sending its body) before
// the answer: nginx's 499. It is never sent, there being nobody to send it
// to.
const StatusClientClosed = 499

// clientGone reports whether err comes of the client leaving: its request
// context was cancelled, or reading its body failed (a hang-up). A body over
// the limit is the client's mistake, answered 413, and one cut by the read
// deadline is answered 408: neither is this.
func clientGone(c *gin.Context, err error) bool {
	if errors.As(err, new(*http.MaxBytesError)) || bodyTimedOut(err) {
		return false
	}
	if errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil {
		return true
	}
	var read *bodyReadError
	return errors.As(err, &read) || errors.Is(err, idempotency.ErrBodyRead)
}

// bodyTimedOut reports whether err is a body read cut by the server's read
// deadline.
func bodyTimedOut(err error) bool {
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		return false
	}
	return errors.As(err, new(*bodyReadError)) || errors.Is(err, idempotency.ErrBodyRead)
}

// bodyReadError wraps the error of reading a request body: the connection
// failed or timed out under it. Whoever reads a body wraps its error so.
type bodyReadError struct{ err error }

func (e *bodyReadError) Error() string { return "read request body: " + e.err.Error() }
func (e *bodyReadError) Unwrap() error { return e.err }

// PaymentInProgressRetryAfter is the Retry-After of payment_in_progress: a
// payment in flight settles within a provider call, or, when its outcome is
// unknown, within a few reconciler rounds.
const PaymentInProgressRetryAfter = 2 * time.Second

// PendingCancelAfterHint names the setting in the 502's detail; the detail
// must not depend on the configured value, since a retry that resumes and
// fails again answers the same bytes.
const PendingCancelAfterHint = "PENDING_CANCEL_AFTER"

func toProblemFields(fields []payments.FieldError) []problem.FieldError {
	out := make([]problem.FieldError, min(len(fields), MaxFieldErrors))
	for i := range out {
		out[i] = problem.FieldError{Field: fields[i].Field, Message: fields[i].Message}
	}
	return out
}

func invalidFieldsDetail(n int, listedFirst bool) string {
	switch {
	case listedFirst:
		return fmt.Sprintf("The request has at least %d invalid fields; the first %d are listed.", n, MaxFieldErrors)
	case n == 1:
		return "The request has 1 invalid field."
	}
	return fmt.Sprintf("The request has %d invalid fields.", n)
}

// retryAfterSeconds spells d as the delay-seconds of Retry-After: whole
// seconds, rounded up so that a client never comes back early, at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// oneLine is err's text on one line (errors.Join puts each error on its own).
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", ": ")
}
