package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ErrStillProcessing is returned, together with the processing payment or
// refund, when PayOrder or RefundPayment stopped before the server knew the
// provider's outcome: the attempts ran out or the context ended while the
// server kept answering 202. The operation is not lost: the server resolves
// it on its own. Read it later (GetPayment), or call again with the same key.
var ErrStillProcessing = errors.New("still processing")

// Sentinels for the codes of the API's problem answers. An *APIError matches
// the one of its code with errors.Is:
//
//	if errors.Is(err, client.ErrPaymentDeclined) { ... }
var (
	ErrKeyMissing       = errors.New("idempotency_key_missing")
	ErrKeyInvalid       = errors.New("idempotency_key_invalid")
	ErrKeyReused        = errors.New("idempotency_key_reused")
	ErrInProgress       = errors.New("idempotency_request_in_progress")
	ErrValidation       = errors.New("validation_failed")
	ErrUnauthorized     = errors.New("unauthorized")
	ErrNotFound         = errors.New("not_found")
	ErrPaymentDeclined  = errors.New("payment_declined")
	ErrOrderAlreadyPaid = errors.New("order_already_paid")
	// ErrPaymentInProgress: the order or payment has a payment or refund in
	// flight. Not final: the client retries it under the same key after
	// Retry-After, and it comes back only when the attempts run out.
	ErrPaymentInProgress = errors.New("payment_in_progress")
	// ErrPaymentCanceled: the key's payment never reached the provider
	// and was canceled. Final for the key: the order is payable again,
	// with a new key (a new PayOrder call makes one).
	ErrPaymentCanceled = errors.New("payment_canceled")
	// ErrRefundCanceled: likewise for a refund; its amount is free again.
	ErrRefundCanceled       = errors.New("refund_canceled")
	ErrCustomerExists       = errors.New("customer_exists")
	ErrRefundExceedsPayment = errors.New("refund_exceeds_payment")
	ErrVersionMismatch      = errors.New("version_mismatch")
	ErrRequestTooLarge      = errors.New("request_too_large")
	ErrRateLimited          = errors.New("rate_limited")
	ErrProviderUnavailable  = errors.New("provider_unavailable")
	ErrServiceUnavailable   = errors.New("service_unavailable")
	ErrInternal             = errors.New("internal_error")
)

// sentinels maps a problem code to its sentinel (each sentinel's text is
// its code).
var sentinels = byText(
	ErrKeyMissing, ErrKeyInvalid, ErrKeyReused, ErrInProgress, ErrValidation,
	ErrUnauthorized, ErrNotFound, ErrPaymentDeclined, ErrOrderAlreadyPaid,
	ErrPaymentInProgress, ErrPaymentCanceled, ErrRefundCanceled, ErrCustomerExists,
	ErrRefundExceedsPayment, ErrVersionMismatch, ErrRequestTooLarge,
	ErrRateLimited, ErrProviderUnavailable, ErrServiceUnavailable, ErrInternal,
)

func byText(errs ...error) map[string]error {
	m := make(map[string]error, len(errs))
	for _, err := range errs {
		m[err.Error()] = err
	}
	return m
}

// FieldError names one field a validation_failed answer refused.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// APIError is an answer of the API other than success: an RFC 9457
// application/problem+json body, or, for an answer that is not one (a proxy's
// 502 page), its status with the start of its body as Detail.
type APIError struct {
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Code is the problem's stable slug, like "payment_declined"; empty when
	// the answer was not problem+json.
	Code string `json:"code"`
	// Title is the short summary of the kind of problem.
	Title string `json:"title"`
	// Detail explains this occurrence, often with what to do next.
	Detail string `json:"detail"`
	// Type is the problem's type URI.
	Type string `json:"type"`
	// Fields lists the refused fields of a validation_failed answer.
	Fields []FieldError `json:"errors"`
	// PaymentID is the payment of a payment_declined, payment_canceled or
	// provider_unavailable answer.
	PaymentID string `json:"payment_id"`
	// RefundID is the refund of a refund_canceled or provider_unavailable
	// answer.
	RefundID string `json:"refund_id"`
	// DeclineCode says why the provider declined, like "card_declined".
	DeclineCode string `json:"decline_code"`
	// RetryAfter is the answer's Retry-After, zero when it had none.
	RetryAfter time.Duration `json:"-"`
	// Replayed is true when the server answered from its stored record: a
	// 402 or a 409 business conflict is stored and replayed like a success.
	Replayed bool `json:"-"`
	// IdempotencyKey is the key the call sent; empty for a GET.
	IdempotencyKey string `json:"-"`
}

// Error says the code, the status and the detail. It never contains the
// idempotency key: errors end up in logs.
func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = strings.ToLower(http.StatusText(e.Status))
	}
	if e.Detail == "" {
		return fmt.Sprintf("%s (%d)", code, e.Status)
	}
	return fmt.Sprintf("%s (%d): %s", code, e.Status, e.Detail)
}

// Is reports whether target is the sentinel of e's code.
func (e *APIError) Is(target error) bool {
	s, ok := sentinels[e.Code]
	return ok && s == target
}

// Retryable reports whether the same request, under the same key, may get
// another answer later: a 409 in progress (idempotency_request_in_progress,
// payment_in_progress), a 429, or a 5xx. Every other answer is final for its
// key, payment_canceled and refund_canceled included.
func (e *APIError) Retryable() bool {
	switch e.Status {
	case http.StatusConflict:
		return e.Code == "idempotency_request_in_progress" || e.Code == "payment_in_progress"
	case http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	default:
		return e.Status >= 500
	}
}

// maxDetail bounds the Detail taken from a body that is not problem+json.
const maxDetail = 200

// toAPIError turns a non-success answer into an *APIError.
func toAPIError(a *answer, key string) *APIError {
	e := &APIError{}
	if isProblem(a.header.Get("Content-Type")) {
		_ = json.Unmarshal(a.body, e) // a broken body still leaves the status below
	}
	e.Status = a.status // the status line, whatever the body says
	if e.Title == "" {
		e.Title = http.StatusText(a.status)
	}
	if e.Code == "" && e.Detail == "" {
		e.Detail = strings.TrimSpace(string(a.body[:min(len(a.body), maxDetail)]))
	}
	e.RetryAfter = a.retryAfter
	e.Replayed = a.replayed
	e.IdempotencyKey = key
	return e
}

func isProblem(contentType string) bool {
	mediaType, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mediaType), "application/problem+json")
}
