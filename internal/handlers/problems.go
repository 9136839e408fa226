package handlers

// The types below document the problem+json answers in the OpenAPI
// document, one per status: each lists, as the enum of its code, the codes
// the error table (errors.go) answers with that status, and carries an
// example of its own, so that Swagger UI shows a 422 as a 422. Nothing
// encodes them: every problem is a problem.Problem written by RenderError.
// TestSpecProblemCodes (spec_test.go) checks that these enums are exactly
// the table's codes, status by status.
//
// swag cannot give one type a different example per response, nor attach
// members to a shared schema without corrupting it, hence one flat type per
// status rather than problem.Problem itself. It writes an array's maxItems
// from validate's max, not from a maxItems tag (which only the request
// decoder reads, bind.go); TestSpecProblemCodes holds Problem400's to
// MaxFieldErrors.

// Problem400 is a request refused as it stands: a body or parameter that is
// invalid (with errors, and error_count when more than 20 were found), or
// an Idempotency-Key missing or malformed.
type Problem400 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/validation_failed"`
	Title  string `json:"title" example:"Validation failed"`
	Status int    `json:"status" enums:"400" example:"400"`
	Detail string `json:"detail" example:"The request has 1 invalid field."`
	Code   string `json:"code" enums:"validation_failed,idempotency_key_missing,idempotency_key_invalid,malformed_request" example:"validation_failed"`
	// Errors lists the refused fields, at most 20; only validation_failed
	// has it, and not when the body is not JSON at all.
	Errors []ProblemField `json:"errors" validate:"optional,max=20"`
	// ErrorCount is how many fields were refused when more than errors
	// lists; decoding may stop early at a size limit, so it can be a lower
	// bound.
	ErrorCount int `json:"error_count" validate:"optional" minimum:"21" example:"57"`
}

// ProblemField names one refused field and why it was refused.
type ProblemField struct {
	// Field is the path of the field in the request, like items[0].quantity.
	Field string `json:"field" example:"items[0].quantity"`
	// Message says what a valid value looks like.
	Message string `json:"message" example:"must be between 1 and 10000"`
}

// Problem401 is a request without a valid API key, or a webhook whose
// signature does not verify.
type Problem401 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/unauthorized"`
	Title  string `json:"title" example:"Unauthorized"`
	Status int    `json:"status" enums:"401" example:"401"`
	Detail string `json:"detail" example:"Send a valid API key as Authorization: Bearer <key>."`
	Code   string `json:"code" enums:"unauthorized,invalid_signature" example:"unauthorized"`
}

// Problem402 is a payment the provider declined: the payment exists, is
// failed, and the order can be paid again with a new key.
type Problem402 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/payment_declined"`
	Title  string `json:"title" example:"Payment declined"`
	Status int    `json:"status" enums:"402" example:"402"`
	Detail string `json:"detail" example:"The provider declined the payment (card_declined). The order is still pending payment: try again with another payment method and a new Idempotency-Key."`
	Code   string `json:"code" enums:"payment_declined" example:"payment_declined"`
	// PaymentID is the failed payment, readable at GET /v1/payments/{id}.
	PaymentID string `json:"payment_id" example:"pay_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	// DeclineCode is the provider's reason.
	DeclineCode string `json:"decline_code" example:"card_declined"`
}

// Problem404 is an id (or key) unknown to the merchant, another merchant's
// included, or a path no route serves.
type Problem404 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/not_found"`
	Title  string `json:"title" example:"Not found"`
	Status int    `json:"status" enums:"404" example:"404"`
	Detail string `json:"detail" example:"No resource with this id exists for your account."`
	Code   string `json:"code" enums:"not_found" example:"not_found"`
}

// Problem405 is a method that the path is not served with; the Allow
// header lists the methods it is served with, and nothing was done.
type Problem405 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/method_not_allowed"`
	Title  string `json:"title" example:"Method not allowed"`
	Status int    `json:"status" enums:"405" example:"405"`
	Detail string `json:"detail" example:"This path is not served with this method; it is served with GET, POST (the Allow header). Nothing was done."`
	Code   string `json:"code" enums:"method_not_allowed" example:"method_not_allowed"`
}

// Problem408 is a request body that did not arrive in time; nothing was
// done.
type Problem408 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/request_timeout"`
	Title  string `json:"title" example:"Request timeout"`
	Status int    `json:"status" enums:"408" example:"408"`
	Detail string `json:"detail" example:"The request body did not arrive in time; nothing was done. Send it again, whole."`
	Code   string `json:"code" enums:"request_timeout" example:"request_timeout"`
}

// Problem409 is a conflict: a business conflict the key's record stores
// and replays (order_already_paid, customer_exists,
// refund_exceeds_payment; payment_canceled with payment_id and
// refund_canceled with refund_id, for an attempt the reconciler canceled),
// payment_in_progress (with Retry-After, not stored), or the idempotency
// layer's own answer (idempotency_request_in_progress with Retry-After, not
// stored; idempotency_key_expired, with IDEMPOTENCY_TOMBSTONES=true only).
type Problem409 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/idempotency_request_in_progress"`
	Title  string `json:"title" example:"Request in progress"`
	Status int    `json:"status" enums:"409" example:"409"`
	Detail string `json:"detail" example:"The original request with this Idempotency-Key is still running. Retry after the time in Retry-After to get its result."`
	Code   string `json:"code" enums:"idempotency_request_in_progress,idempotency_key_expired,order_already_paid,payment_in_progress,payment_canceled,refund_canceled,customer_exists,refund_exceeds_payment" example:"idempotency_request_in_progress"`
	// PaymentID is the canceled payment, with payment_canceled only.
	PaymentID string `json:"payment_id" validate:"optional" example:"pay_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	// RefundID is the canceled refund, with refund_canceled only.
	RefundID string `json:"refund_id" validate:"optional" example:"re_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
}

// Problem412 is an If-Match that names a version other than the current
// one; nothing changed.
type Problem412 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/version_mismatch"`
	Title  string `json:"title" example:"Version mismatch"`
	Status int    `json:"status" enums:"412" example:"412"`
	Detail string `json:"detail" example:"The order has changed since the version in If-Match; nothing was changed. Fetch it again (its ETag is the current version), decide again, and send the new ETag."`
	Code   string `json:"code" enums:"version_mismatch" example:"version_mismatch"`
}

// Problem413 is a body over MAX_BODY_BYTES.
type Problem413 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/request_too_large"`
	Title  string `json:"title" example:"Request too large"`
	Status int    `json:"status" enums:"413" example:"413"`
	Detail string `json:"detail" example:"The request body is larger than 1048576 bytes."`
	Code   string `json:"code" enums:"request_too_large" example:"request_too_large"`
}

// Problem415 is a request body whose Content-Type is missing or not
// application/json. Nothing was done, and nothing was stored under the key.
type Problem415 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/unsupported_media_type"`
	Title  string `json:"title" example:"Unsupported media type"`
	Status int    `json:"status" enums:"415" example:"415"`
	Detail string `json:"detail" example:"A request body must be sent with Content-Type: application/json (charset=utf-8 is allowed); nothing was done. Send it again with that type, under the same Idempotency-Key if it has one."`
	Code   string `json:"code" enums:"unsupported_media_type" example:"unsupported_media_type"`
}

// Problem422 is an Idempotency-Key used before for a different request.
type Problem422 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/idempotency_key_reused"`
	Title  string `json:"title" example:"Idempotency key reused"`
	Status int    `json:"status" enums:"422" example:"422"`
	Detail string `json:"detail" example:"This Idempotency-Key was already used for a different request (other body, endpoint or path). Use a new key for a new operation."`
	Code   string `json:"code" enums:"idempotency_key_reused" example:"idempotency_key_reused"`
}

// Problem429 is a merchant over its limit of new Idempotency-Keys, when
// one is set (retries of known keys are never limited), a connection over
// MAX_CONNS_PER_CLIENT or MAX_CONNS, or an address over its budget of
// unknown API keys (UNKNOWN_KEY_BUDGET).
type Problem429 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/rate_limited"`
	Title  string `json:"title" example:"Rate limited"`
	Status int    `json:"status" enums:"429" example:"429"`
	Detail string `json:"detail" example:"Too many new Idempotency-Keys from this merchant; nothing was done. Retry after the time in Retry-After. Retries of existing keys are never limited."`
	Code   string `json:"code" enums:"rate_limited,too_many_connections,too_many_unknown_keys" example:"rate_limited"`
}

// Problem431 is a request whose header block is over MAX_HEADER_BYTES;
// the server answers it before any route, and nothing was done.
type Problem431 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/request_header_too_large"`
	Title  string `json:"title" example:"Request header too large"`
	Status int    `json:"status" enums:"431" example:"431"`
	Detail string `json:"detail" example:"The request's header block is larger than the server accepts (MAX_HEADER_BYTES); nothing was done."`
	Code   string `json:"code" enums:"request_header_too_large" example:"request_header_too_large"`
}

// Problem501 is a request with a Transfer-Encoding the server does not
// implement (anything but chunked); nothing was done.
type Problem501 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/not_implemented"`
	Title  string `json:"title" example:"Not implemented"`
	Status int    `json:"status" enums:"501" example:"501"`
	Detail string `json:"detail" example:"The request's Transfer-Encoding is not supported (only chunked is); nothing was done."`
	Code   string `json:"code" enums:"not_implemented" example:"not_implemented"`
}

// Problem505 is a request in an HTTP version other than 1.0 and 1.1;
// nothing was done.
type Problem505 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/http_version_not_supported"`
	Title  string `json:"title" example:"HTTP version not supported"`
	Status int    `json:"status" enums:"505" example:"505"`
	Detail string `json:"detail" example:"The server speaks HTTP/1.0 and HTTP/1.1; nothing was done."`
	Code   string `json:"code" enums:"http_version_not_supported" example:"http_version_not_supported"`
}

// Problem417 is a request whose Expect header is not 100-continue; the
// server answers it before any route, and nothing was done.
type Problem417 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/expectation_failed"`
	Title  string `json:"title" example:"Expectation failed"`
	Status int    `json:"status" enums:"417" example:"417"`
	Detail string `json:"detail" example:"The request's Expect header asks for something other than 100-continue, the one expectation the server meets; nothing was done."`
	Code   string `json:"code" enums:"expectation_failed" example:"expectation_failed"`
}

// Problem500 is anything unexpected; nothing is stored, and the same key
// may be sent again.
type Problem500 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/internal_error"`
	Title  string `json:"title" example:"Internal error"`
	Status int    `json:"status" enums:"500" example:"500"`
	Detail string `json:"detail" example:"Something went wrong on our side. Retry later with the same Idempotency-Key."`
	Code   string `json:"code" enums:"internal_error" example:"internal_error"`
}

// Problem502Payment is a provider that failed before charging anything;
// payment_id names the attempt, which a retry with the same key resumes
// until the reconciler cancels it (PENDING_CANCEL_AFTER).
type Problem502Payment struct {
	Type      string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/provider_unavailable"`
	Title     string `json:"title" example:"Provider unavailable"`
	Status    int    `json:"status" enums:"502" example:"502"`
	Detail    string `json:"detail" example:"The payment provider failed before doing anything; nothing was charged or refunded. Retry with the same Idempotency-Key: it resumes the same operation, until an attempt abandoned for PENDING_CANCEL_AFTER is canceled."`
	Code      string `json:"code" enums:"provider_unavailable" example:"provider_unavailable"`
	PaymentID string `json:"payment_id" example:"pay_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
}

// Problem502Refund is Problem502Payment for a refund: refund_id names the
// attempt.
type Problem502Refund struct {
	Type     string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/provider_unavailable"`
	Title    string `json:"title" example:"Provider unavailable"`
	Status   int    `json:"status" enums:"502" example:"502"`
	Detail   string `json:"detail" example:"The payment provider failed before doing anything; nothing was charged or refunded. Retry with the same Idempotency-Key: it resumes the same operation, until an attempt abandoned for PENDING_CANCEL_AFTER is canceled."`
	Code     string `json:"code" enums:"provider_unavailable" example:"provider_unavailable"`
	RefundID string `json:"refund_id" example:"re_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
}

// Problem503 is a database that cannot be reached, or (the webhook only,
// provider_unavailable) a provider that could not be asked about an event;
// nothing was done.
type Problem503 struct {
	Type   string `json:"type" format:"uri" example:"https://errors.idempotent-payments.dev/service_unavailable"`
	Title  string `json:"title" example:"Service unavailable"`
	Status int    `json:"status" enums:"503" example:"503"`
	Detail string `json:"detail" example:"The database cannot be reached. Retry later with the same Idempotency-Key: an operation already under way resumes where it stopped, and nothing happens twice."`
	Code   string `json:"code" enums:"service_unavailable,provider_unavailable" example:"service_unavailable"`
}
