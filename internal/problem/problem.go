// Package problem writes RFC 9457 "problem details" answers
// (application/problem+json), the one shape every error of the API takes.
//
// A problem carries the standard members type, title, status and detail, and
// a code member equal to the slug its type URI ends with, so that clients can
// switch on a short stable string instead of parsing a URI. Validation
// problems add errors, one entry per refused field. Members specific to one
// kind of problem (payment_id on a declined payment) travel in Extra and are
// written at the top level, as RFC 9457 asks for extension members.
//
// Which error becomes which problem is decided in one table in the HTTP layer
// (internal/handlers); this package only knows the shape and the codes.
package problem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// ContentType is the media type of every problem answer.
const ContentType = "application/problem+json"

// TypeBase prefixes every problem type URI; the code slug completes it.
const TypeBase = "https://errors.idempotent-payments.dev/"

// The codes the API contract names. Each is the last segment of its type URI.
const (
	CodeIdempotencyKeyMissing = "idempotency_key_missing"
	CodeIdempotencyKeyInvalid = "idempotency_key_invalid"
	CodeIdempotencyKeyReused  = "idempotency_key_reused"
	CodeIdempotencyInProgress = "idempotency_request_in_progress"
	CodeIdempotencyKeyExpired = "idempotency_key_expired"
	CodeValidationFailed      = "validation_failed"
	CodeUnauthorized          = "unauthorized"
	CodeInvalidSignature      = "invalid_signature"
	CodeNotFound              = "not_found"
	CodeMethodNotAllowed      = "method_not_allowed"
	CodePaymentDeclined       = "payment_declined"
	CodeOrderAlreadyPaid      = "order_already_paid"
	CodePaymentInProgress     = "payment_in_progress"
	CodePaymentCanceled       = "payment_canceled"
	CodeRefundCanceled        = "refund_canceled"
	CodeCustomerExists        = "customer_exists"
	CodeRefundExceedsPayment  = "refund_exceeds_payment"
	CodeVersionMismatch       = "version_mismatch"
	CodeRequestTooLarge       = "request_too_large"
	CodeRequestTimeout        = "request_timeout"
	CodeUnsupportedMediaType  = "unsupported_media_type"
	CodeRateLimited           = "rate_limited"
	CodeProviderUnavailable   = "provider_unavailable"
	CodeServiceUnavailable    = "service_unavailable"
	CodeInternalError         = "internal_error"
	// The server's own answers, before any route (handlers.GuardListener).
	CodeMalformedRequest        = "malformed_request"
	CodeRequestHeaderTooLarge   = "request_header_too_large"
	CodeNotImplemented          = "not_implemented"
	CodeHTTPVersionNotSupported = "http_version_not_supported"
	CodeExpectationFailed       = "expectation_failed"
	CodeTooManyConnections      = "too_many_connections"
	CodeTooManyUnknownKeys      = "too_many_unknown_keys"
)

// Problem is one RFC 9457 problem details object.
type Problem struct {
	// Type is a URI that identifies the kind of problem; it ends with Code.
	Type string `json:"type" validate:"required" example:"https://errors.idempotent-payments.dev/validation_failed"`
	// Title is a short summary of the kind of problem, the same for every
	// occurrence.
	Title string `json:"title" validate:"required" example:"Validation failed"`
	// Status repeats the HTTP status code.
	Status int `json:"status" validate:"required" example:"400"`
	// Detail explains this occurrence.
	Detail string `json:"detail" validate:"required" example:"The request has 1 invalid field."`
	// Code is the slug of Type, stable for clients to switch on.
	Code string `json:"code" validate:"required" example:"validation_failed"`
	// Errors lists the refused fields of a validation problem, at most 20.
	Errors []FieldError `json:"errors,omitempty"`
	// ErrorCount is how many fields were refused when more than Errors
	// lists; decoding may stop early at a size limit, so it can be a lower
	// bound.
	ErrorCount int `json:"error_count,omitempty"`
	// Extra holds extension members (for example payment_id), written at the
	// top level of the object. Names that clash with a standard member are
	// ignored.
	Extra map[string]any `json:"-" swaggerignore:"true"`
}

// FieldError names one refused field and why it was refused.
type FieldError struct {
	// Field is the path of the field in the request, like items[0].quantity.
	Field string `json:"field" validate:"required" example:"items[0].quantity"`
	// Message says what a valid value looks like.
	Message string `json:"message" validate:"required" example:"must be between 1 and 10000"`
}

// New returns a problem of the given status and code, its Type derived from
// the code.
func New(status int, code, title, detail string) Problem {
	return Problem{Type: TypeURI(code), Title: title, Status: status, Detail: detail, Code: code}
}

// TypeURI returns the type URI of a code.
func TypeURI(code string) string { return TypeBase + code }

// standard is Problem without its methods, so that encoding/json handles the
// fixed members and MarshalJSON only appends the extensions.
type standard Problem

var reserved = []string{"type", "title", "status", "detail", "code", "errors", "error_count"}

// MarshalJSON writes the standard members followed by the Extra members in
// name order, so that the same problem always encodes to the same bytes (an
// idempotent replay must be byte-identical).
func (p Problem) MarshalJSON() ([]byte, error) {
	base, err := json.Marshal(standard(p))
	if err != nil {
		return nil, err
	}
	if len(p.Extra) == 0 {
		return base, nil
	}
	names := make([]string, 0, len(p.Extra))
	for name := range p.Extra {
		if !slices.Contains(reserved, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var buf bytes.Buffer
	buf.Write(base[:len(base)-1]) // drop the closing brace
	for _, name := range names {
		k, _ := json.Marshal(name)
		v, err := json.Marshal(p.Extra[name])
		if err != nil {
			return nil, fmt.Errorf("problem member %q: %w", name, err)
		}
		buf.WriteByte(',')
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads a problem, putting members it does not know into Extra;
// clients and tests read problems with it.
func (p *Problem) UnmarshalJSON(data []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return err
	}
	// The standard members by their exact names: encoding/json matches
	// names regardless of case, so "Code" would otherwise overwrite
	// "code"; a member spelled otherwise is an extension.
	std := make(map[string]json.RawMessage, len(reserved))
	for _, name := range reserved {
		if raw, ok := all[name]; ok {
			std[name] = raw
			delete(all, name)
		}
	}
	b, err := json.Marshal(std)
	if err != nil {
		return err
	}
	var s standard
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if len(all) > 0 {
		s.Extra = make(map[string]any, len(all))
		for name, raw := range all {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return err
			}
			s.Extra[name] = v
		}
	}
	*p = Problem(s)
	return nil
}

// Encode is p as an answer's body. The standard members always encode;
// an Extra value that cannot (a programming error) is dropped rather than
// losing the whole answer.
func Encode(p Problem) []byte {
	body, err := json.Marshal(p)
	if err != nil {
		p.Extra = nil
		body, _ = json.Marshal(p)
	}
	return body
}
