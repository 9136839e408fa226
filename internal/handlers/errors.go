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

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency"
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

// errInvalidSignature refuses a provider webhook whose signature does not
// verify. The webhook handler wraps the verifier's reason with it; the
// reason is logged, never shown, so a forger learns nothing from the answer.
var errInvalidSignature = errors.New("invalid webhook signature")

// RenderError answers the request with the problem+json that err stands for
// and aborts the handler chain. It is the only place that maps errors to
// statuses: handlers and middleware (the idempotency Keeper included) hand
// it their error and return. An error it does not know is a 500 whose cause
// is logged, never shown.
func RenderError(c *gin.Context, err error) {
	if bodyTimedOut(err) {
		// A body that did not arrive within the read deadline: a slow or
		// stalled sender, answered (and logged) as its fault, not ours.
		loggerFrom(c).InfoContext(c.Request.Context(), "request body did not arrive in time",
			"method", c.Request.Method, "route", c.FullPath())
		problem.Write(c, problem.New(http.StatusRequestTimeout, problem.CodeRequestTimeout, "Request timeout",
			"The request body did not arrive in time; nothing was done. Send it again, whole."))
		return
	}
	if clientGone(c, err) {
		// Nobody reads this answer. It is no fault of ours: logged at info
		// and counted under StatusClientClosed, not as a 500.
		loggerFrom(c).InfoContext(c.Request.Context(), "client went away before the answer",
			"method", c.Request.Method, "route", c.FullPath(), "error", err)
		c.AbortWithStatus(StatusClientClosed)
		return
	}
	problem.Write(c, problemFor(c, err))
}

// StatusClientClosed is the status the access log and the metrics record
// for a request whose client hung up (or stopped sending its body) before
// the answer: nginx's 499. It is never sent, there being nobody to send it
// to.
const StatusClientClosed = 499

// clientGone reports whether err comes of the client leaving: its request
// context was cancelled, or reading its body failed (a hang-up, or a body
// that did not arrive before the read deadline). A body over the limit is
// the client's mistake, answered 413, not this.
func clientGone(c *gin.Context, err error) bool {
	if errors.As(err, new(*http.MaxBytesError)) {
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

// problemFor is the table. Order matters where errors can wrap each other:
// a body cut at the size limit is 413 whoever read it, and a lost database
// is 503 whatever was being attempted.
func problemFor(c *gin.Context, err error) problem.Problem {
	var (
		tooLarge    *http.MaxBytesError
		bodyLimit   *idempotency.BodyTooLargeError
		inProgress  *idempotency.InProgressError
		rateLimited *idempotency.RateLimitedError
		invalid     *payments.ValidationError
		badRequest  *requestError
		declined    *payments.DeclinedError
		canceled    *payments.CanceledError
		unavailable *payments.UnavailableError
	)
	switch {
	case errors.As(err, &tooLarge):
		return problem.New(http.StatusRequestEntityTooLarge, problem.CodeRequestTooLarge, "Request too large",
			fmt.Sprintf("The request body is larger than %d bytes.", tooLarge.Limit))

	case errors.As(err, &bodyLimit):
		return problem.New(http.StatusRequestEntityTooLarge, problem.CodeRequestTooLarge, "Request too large",
			fmt.Sprintf("The request body is larger than %d bytes.", bodyLimit.Limit))

	case errors.Is(err, errUnsupportedMediaType):
		return problem.New(http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType, "Unsupported media type",
			"A request body must be sent with Content-Type: application/json (charset=utf-8 is allowed); nothing was done. Send it again with that type, under the same Idempotency-Key if it has one.")

	case errors.Is(err, database.ErrUnavailable):
		c.Header("Retry-After", "1")
		return problem.New(http.StatusServiceUnavailable, problem.CodeServiceUnavailable, "Service unavailable",
			"The database cannot be reached. Retry later with the same Idempotency-Key: an operation already under way resumes where it stopped, and nothing happens twice.")

	case errors.Is(err, idempotency.ErrKeyMissing):
		return problem.New(http.StatusBadRequest, problem.CodeIdempotencyKeyMissing, "Idempotency key missing",
			"This request needs an Idempotency-Key header: a unique value per operation, reused on every retry of it.")

	case errors.Is(err, idempotency.ErrKeyInvalid):
		// The error says why (empty, too long, which character); it never
		// carries the key itself.
		return problem.New(http.StatusBadRequest, problem.CodeIdempotencyKeyInvalid, "Idempotency key invalid",
			oneLine(err))

	case errors.Is(err, idempotency.ErrKeyReused):
		return problem.New(http.StatusUnprocessableEntity, problem.CodeIdempotencyKeyReused, "Idempotency key reused",
			"This Idempotency-Key was already used for a different request (other body, endpoint or path). Use a new key for a new operation.")

	case errors.Is(err, idempotency.ErrKeyExpired):
		return problem.New(http.StatusConflict, problem.CodeIdempotencyKeyExpired, "Idempotency key expired",
			"This Idempotency-Key was used for this request longer ago than the keys are kept; nothing was done. If you mean to repeat the operation, send it with a new key.")

	case errors.As(err, &inProgress):
		c.Header("Retry-After", retryAfterSeconds(inProgress.RetryAfter))
		return problem.New(http.StatusConflict, problem.CodeIdempotencyInProgress, "Request in progress",
			"The original request with this Idempotency-Key is still running. Retry after the time in Retry-After to get its result.")

	case errors.As(err, &rateLimited):
		c.Header("Retry-After", retryAfterSeconds(rateLimited.RetryAfter))
		return problem.New(http.StatusTooManyRequests, problem.CodeRateLimited, "Rate limited",
			"Too many new Idempotency-Keys from this merchant; nothing was done. Retry after the time in Retry-After. Retries of existing keys are never limited.")

	case errors.Is(err, idempotency.ErrFenced):
		// Another request took this key's operation over while this one ran
		// (its lock had timed out): that request's answer is the one that
		// will be kept, so send the client to fetch it, as for a duplicate.
		c.Header("Retry-After", "1")
		return problem.New(http.StatusConflict, problem.CodeIdempotencyInProgress, "Request in progress",
			"Another request with this Idempotency-Key has taken this operation over. Retry after the time in Retry-After to get its result.")

	case errors.Is(err, idempotency.ErrMalformedBody):
		return problem.New(http.StatusBadRequest, problem.CodeValidationFailed, "Validation failed", oneLine(err))

	case errors.As(err, &invalid):
		return validationProblem("", toProblemFields(invalid.Fields), len(invalid.Fields))

	case errors.As(err, &badRequest):
		return validationProblem(badRequest.detail, badRequest.fields, max(badRequest.count, len(badRequest.fields)))

	case errors.Is(err, merchants.ErrUnauthorized):
		c.Header("WWW-Authenticate", `Bearer realm="api"`)
		return problem.New(http.StatusUnauthorized, problem.CodeUnauthorized, "Unauthorized",
			"Send a valid API key as Authorization: Bearer <key>.")

	case errors.Is(err, errInvalidSignature):
		return problem.New(http.StatusUnauthorized, problem.CodeInvalidSignature, "Invalid signature",
			"The Provider-Signature header is missing or malformed, does not match the body, or is older than 5 minutes.")

	case errors.As(err, &declined):
		return declinedProblem(declined)

	case errors.As(err, &canceled):
		return canceledProblem(canceled)

	case errors.Is(err, payments.ErrOrderAlreadyPaid):
		return problem.New(http.StatusConflict, problem.CodeOrderAlreadyPaid, "Order already paid",
			"The order is paid. Fetch the order to see its state.")

	case errors.Is(err, payments.ErrPaymentInProgress):
		c.Header("Retry-After", retryAfterSeconds(PaymentInProgressRetryAfter))
		return problem.New(http.StatusConflict, problem.CodePaymentInProgress, "Payment in progress",
			"The order or payment has a payment or refund in flight; nothing was done. Retry after the time in Retry-After, with the same Idempotency-Key: this answer is not stored.")

	case errors.Is(err, payments.ErrCustomerExists):
		return problem.New(http.StatusConflict, problem.CodeCustomerExists, "Customer exists",
			"A customer with this email exists already for your account. Fetch it instead of creating it again.")

	case errors.Is(err, payments.ErrRefundExceedsPayment):
		return problem.New(http.StatusConflict, problem.CodeRefundExceedsPayment, "Refund exceeds payment",
			"The refund is larger than what is left to refund of the payment, or the payment has not succeeded.")

	case errors.Is(err, payments.ErrVersionMismatch):
		return problem.New(http.StatusPreconditionFailed, problem.CodeVersionMismatch, "Version mismatch",
			"The order has changed since the version in If-Match; nothing was changed. Fetch it again (its ETag is the current version), decide again, and send the new ETag.")

	case errors.Is(err, payments.ErrProviderUnreachable):
		// A webhook event the provider could not be asked about: nothing
		// was applied, and the provider delivers it again.
		c.Header("Retry-After", "5")
		return problem.New(http.StatusServiceUnavailable, problem.CodeProviderUnavailable, "Provider unavailable",
			"The payment provider could not be asked about this event, so nothing was applied. Deliver it again later.")

	case errors.As(err, &unavailable):
		p := problem.New(http.StatusBadGateway, problem.CodeProviderUnavailable, "Provider unavailable",
			fmt.Sprintf("The payment provider failed before doing anything; nothing was charged or refunded. Retry with the same Idempotency-Key: it resumes the same operation, until an attempt abandoned for %s is canceled.", PendingCancelAfterHint))
		if unavailable.RefundID != "" {
			p.Extra = map[string]any{"refund_id": unavailable.RefundID}
		} else {
			p.Extra = map[string]any{"payment_id": unavailable.PaymentID}
		}
		return p

	case errors.Is(err, payments.ErrProviderUnavailable):
		return problem.New(http.StatusBadGateway, problem.CodeProviderUnavailable, "Provider unavailable",
			"The payment provider failed before doing anything; nothing was charged. Retry with the same Idempotency-Key: it resumes the same operation.")

	case errors.Is(err, payments.ErrNotFound):
		return problem.New(http.StatusNotFound, problem.CodeNotFound, "Not found",
			"No resource with this id exists for your account.")

	case errors.Is(err, idempotency.ErrNotFound):
		// Only the key introspection route lets it through: the middleware
		// handles a missing record itself.
		return problem.New(http.StatusNotFound, problem.CodeNotFound, "Not found",
			"No live record exists under this Idempotency-Key for your account: never used, expired, or given back after an answer that is not kept.")

	case errors.Is(err, errNoRoute):
		return problem.New(http.StatusNotFound, problem.CodeNotFound, "Not found",
			"No endpoint matches this method and path.")

	default:
		loggerFrom(c).ErrorContext(c.Request.Context(), "internal error",
			"error", err, "method", c.Request.Method, "route", c.FullPath())
		return problem.New(http.StatusInternalServerError, problem.CodeInternalError, "Internal error",
			"Something went wrong on our side. Retry later with the same Idempotency-Key.")
	}
}

// declinedProblem is the 402 of a declined payment. It is built from the
// decline alone, so that the handler (through the table) and PaymentAnswer
// (which the reconciler stores when it learns of a decline later) write the
// same bytes for the same payment: a replay must not depend on who answered
// first.
func declinedProblem(e *payments.DeclinedError) problem.Problem {
	p := problem.New(http.StatusPaymentRequired, problem.CodePaymentDeclined, "Payment declined",
		fmt.Sprintf("The provider declined the payment (%s). The order is still pending payment: try again with another payment method and a new Idempotency-Key.", e.DeclineCode))
	p.Extra = map[string]any{"payment_id": e.PaymentID, "decline_code": e.DeclineCode}
	return p
}

// canceledProblem is the 409 of a payment or refund the reconciler canceled,
// built from the ids alone so that the reconciler (which stores it) and a
// request (which answers it) write the same bytes.
func canceledProblem(e *payments.CanceledError) problem.Problem {
	if e.RefundID != "" {
		p := problem.New(http.StatusConflict, problem.CodeRefundCanceled, "Refund canceled",
			"This refund never reached the provider and was abandoned, so it was canceled; nothing was refunded and its amount is free again. To refund, send a new request with a new Idempotency-Key.")
		p.Extra = map[string]any{"refund_id": e.RefundID}
		return p
	}
	p := problem.New(http.StatusConflict, problem.CodePaymentCanceled, "Payment canceled",
		"This payment never reached the provider and was abandoned, so it was canceled; nothing was charged. The order is payable again: pay it with a new Idempotency-Key.")
	p.Extra = map[string]any{"payment_id": e.PaymentID}
	return p
}

// PaymentInProgressRetryAfter is the Retry-After of payment_in_progress: a
// payment in flight settles within a provider call, or, when its outcome is
// unknown, within a few reconciler rounds.
const PaymentInProgressRetryAfter = 2 * time.Second

// PendingCancelAfterHint names the setting in the 502's detail; the detail
// must not depend on the configured value, since a retry that resumes and
// fails again answers the same bytes.
const PendingCancelAfterHint = "PENDING_CANCEL_AFTER"

// validationProblem is the 400 of a refused request: at most MaxFieldErrors
// fields listed, and error_count when more were found (a lower bound when
// decoding stopped at a size limit).
func validationProblem(detail string, fields []problem.FieldError, count int) problem.Problem {
	if detail == "" {
		detail = invalidFieldsDetail(count, len(fields) < count)
	}
	p := problem.New(http.StatusBadRequest, problem.CodeValidationFailed, "Validation failed", detail)
	p.Errors = fields[:min(len(fields), MaxFieldErrors)]
	if count > len(p.Errors) {
		p.ErrorCount = count
	}
	return p
}

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
