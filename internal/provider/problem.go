package provider

import (
	"encoding/json"
	"errors"
	"net/http"
)

// Problem codes the provider answers with, in the code member of its
// problem+json bodies and in APIError.Code.
const (
	CodeIdempotencyKeyMissing = "idempotency_key_missing"
	CodeIdempotencyKeyInvalid = "idempotency_key_invalid"
	// CodeIdempotencyKeyReused: the key was used before for a different
	// request (other body or other endpoint).
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeValidationFailed     = "validation_failed"
	CodeRequestTooLarge      = "request_too_large"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	// CodeChargeNotRefundable: a refund of a charge that did not succeed.
	CodeChargeNotRefundable = "charge_not_refundable"
	// CodeUnavailable: the provider failed before any effect (503).
	CodeUnavailable = "provider_unavailable"
)

// problemTypeBase prefixes every problem type URI; the URI ends with the
// code, so a client can match on either.
const problemTypeBase = "https://idemkeys.dev/problems/provider/"

var problemTitles = map[string]string{
	CodeIdempotencyKeyMissing: "Idempotency key missing",
	CodeIdempotencyKeyInvalid: "Idempotency key invalid",
	CodeIdempotencyKeyReused:  "Idempotency key reused",
	CodeValidationFailed:      "Validation failed",
	CodeRequestTooLarge:       "Request too large",
	CodeNotFound:              "Not found",
	CodeMethodNotAllowed:      "Method not allowed",
	CodeChargeNotRefundable:   "Charge not refundable",
	CodeUnavailable:           "Provider unavailable",
}

// problem is an RFC 9457 body. The client decodes the same struct.
type problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail"`
	Code   string       `json:"code"`
	Errors []FieldError `json:"errors,omitempty"`
}

func writeProblem(w http.ResponseWriter, status int, code, detail string, fields ...FieldError) {
	title, ok := problemTitles[code]
	if !ok {
		title = http.StatusText(status)
	}
	body, _ := json.Marshal(problem{
		Type:   problemTypeBase + code,
		Title:  title,
		Status: status,
		Detail: detail,
		Code:   code,
		Errors: fields,
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Why the ledger refused to act. Handlers pass them to writeLedgerError,
// the one place that turns them into HTTP answers.
var (
	errKeyReused         = errors.New("idempotency key already used for a different request")
	errUnavailable       = errors.New("provider unavailable")
	errChargeNotFound    = errors.New("no such charge")
	errChargeNotRefunded = errors.New("charge did not succeed, so there is nothing to refund")
)

func writeLedgerError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errKeyReused):
		writeProblem(w, http.StatusUnprocessableEntity, CodeIdempotencyKeyReused,
			"this Idempotency-Key was already used for a different request; use a new key for a new request")
	case errors.Is(err, errUnavailable):
		// Retry-After tells a polite client when to come back; nothing
		// happened, so coming back with the same key is safe.
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, CodeUnavailable,
			"the provider is unavailable; nothing was done, try again with the same key")
	case errors.Is(err, errChargeNotFound):
		writeProblem(w, http.StatusNotFound, CodeNotFound, err.Error())
	case errors.Is(err, errChargeNotRefunded):
		writeProblem(w, http.StatusBadRequest, CodeChargeNotRefundable, err.Error())
	default:
		writeProblem(w, http.StatusInternalServerError, "internal", err.Error())
	}
}
