package handlers

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
)

// PaymentService runs the payment, refund and provider-event use cases
// (payments.Service).
type PaymentService interface {
	// PayOrder charges the order's total. It returns the payment
	// (succeeded, failed, canceled, or processing when the provider's
	// outcome is unknown: every final outcome is a result), or: a
	// *payments.ValidationError; an error wrapping payments.ErrNotFound,
	// payments.ErrOrderAlreadyPaid, payments.ErrPaymentInProgress, a
	// *payments.UnavailableError, idempotency.ErrFenced (op lost the
	// operation) or database.ErrUnavailable.
	PayOrder(ctx context.Context, op *idempotency.Op, merchantID, orderID string, in payments.PayInput) (payments.Payment, error)
	// GetPayment returns an error wrapping payments.ErrNotFound or
	// database.ErrUnavailable.
	GetPayment(ctx context.Context, merchantID, id string) (payments.Payment, error)
	// RefundPayment refunds in.Amount (all that is left when nil). It returns
	// the refund (succeeded, failed, canceled, or processing when the
	// outcome is unknown), or: a *payments.ValidationError; an error
	// wrapping payments.ErrNotFound, payments.ErrRefundExceedsPayment,
	// payments.ErrPaymentInProgress, a *payments.UnavailableError,
	// idempotency.ErrFenced or database.ErrUnavailable.
	RefundPayment(ctx context.Context, op *idempotency.Op, merchantID, paymentID string, in payments.RefundInput) (payments.Refund, error)
	// GetRefund returns an error wrapping payments.ErrNotFound or
	// database.ErrUnavailable.
	GetRefund(ctx context.Context, merchantID, id string) (payments.Refund, error)
	// ApplyProviderEvent applies a verified webhook event at most once per
	// event id, and only what the provider confirms; the outcome says what
	// became of it. It returns an error wrapping
	// payments.ErrProviderUnreachable (nothing applied) or
	// database.ErrUnavailable.
	ApplyProviderEvent(ctx context.Context, ev payments.ProviderEvent) (payments.EventOutcome, error)
}

// PayOrderRequest is the body of POST /v1/orders/{id}/payments.
type PayOrderRequest struct {
	// PaymentMethod is a payment method token: 1-255 visible ASCII
	// characters starting with "pm_". The mock provider's test methods pick
	// the outcome: pm_card_visa, pm_card_declined,
	// pm_card_insufficient_funds, pm_fault_lost_response,
	// pm_fault_unavailable, pm_fault_slow. A token the provider does not
	// know is declined with invalid_payment_method.
	PaymentMethod string `json:"payment_method" validate:"required" minLength:"1" maxLength:"255" example:"pm_card_visa"`
}

// RefundPaymentRequest is the body of POST /v1/payments/{id}/refunds. An
// empty body, {} and {"amount": null} all refund what is left.
type RefundPaymentRequest struct {
	// Amount to refund in the payment's minor unit; omitted: all that is
	// left.
	Amount *int64 `json:"amount,omitempty" validate:"optional" extensions:"x-nullable" minimum:"1" example:"1000"`
}

// paymentHandlers serves the payment and refund routes.
type paymentHandlers struct {
	payments PaymentService
}

// payOrder godoc
//
//	@Summary		Pay an order
//	@Description	Charges the order's amount_total at the payment provider with payment_method. 201: the payment succeeded and the order is paid. 402: the provider declined; the payment is failed and the order stays pending_payment, so a new Idempotency-Key with another method may try again. 202: the provider's outcome is unknown (timeout, lost answer); the payment is processing until the reconciler, a provider webhook or a retry with the same key settles it, and such a retry answers 202 while unknown and the final 201 or 402 once known. 502: the provider did nothing (payment_id names the attempt); retry with the same key, which resumes the same payment (same provider key, never a second charge), until the reconciler cancels an attempt abandoned for PENDING_CANCEL_AFTER: the key then answers 409 payment_canceled and the order is payable again with a new key. 409 payment_in_progress: another payment of the order is in flight; nothing was done or stored, retry after Retry-After.
//	@Description	Idempotent: a retry with the same Idempotency-Key and body replays a final answer (201, 402, 409) byte for byte with Idempotent-Replayed: true, and the provider is charged at most once per key.
//	@ID				payOrder
//	@Tags			payments
//	@Accept			json
//	@Security		BearerAuth
//	@Param			Idempotency-Key	header		string	true	"Unique key of this operation, reused on every retry of it: 1-255 visible ASCII characters (0x21-0x7E)"	minlength(1)	maxlength(255)
//	@Param			id				path	string			true	"Order id"	example(ord_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D)
//	@Param			payment			body	PayOrderRequest	true	"How to pay"
//	@Produce		json
//	@Success		201	{object}	answers.PaymentResponse	"succeeded"
//	@Success		202	{object}	answers.PaymentResponse	"processing: the provider's outcome is not known yet"
//	@Header			201,202	{string}	Location	"/v1/payments/{id}"
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"validation_failed, idempotency_key_missing or idempotency_key_invalid, or malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
//	@Failure		402	{object}	Problem402	"payment_declined, with payment_id and decline_code"
//	@Failure		404	{object}	Problem404	"not_found: no such order"
//	@Failure		408	{object}	Problem408	"request_timeout: the body did not arrive in time; nothing was done"
//	@Failure		409	{object}	Problem409	"order_already_paid (the order is paid; stored and replayed), payment_canceled (the key's payment never reached the provider and was canceled; with payment_id; stored), payment_in_progress (another payment of the order is in flight; with Retry-After; not stored), idempotency_request_in_progress (with Retry-After), or idempotency_key_expired (IDEMPOTENCY_TOMBSTONES=true only)"
//	@Failure		413	{object}	Problem413	"request_too_large: the body is over MAX_BODY_BYTES"
//	@Failure		415	{object}	Problem415	"unsupported_media_type: the body's Content-Type is missing or not application/json; nothing was done or stored"
//	@Failure		422	{object}	Problem422	"idempotency_key_reused: the key was used before for a different request"
//	@Failure		429	{object}	Problem429	"rate_limited: more than RATE_LIMIT_NEW_KEYS new keys from this merchant in RATE_LIMIT_WINDOW (100 a second by default; 0 turns the limit off); retries of known keys are never limited, or too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all"
//	@Failure		500	{object}	Problem500	"internal_error: nothing was stored; the same request may be sent again"
//	@Failure		502	{object}	Problem502Payment	"provider_unavailable: nothing was charged; payment_id names the attempt, which a retry with the same key resumes until it is canceled (PENDING_CANCEL_AFTER)"
//	@Failure		503	{object}	Problem503	"service_unavailable: the database cannot be reached; nothing was done"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			409,429,503	{integer}	Retry-After	"seconds to wait before retrying"
//	@Header			201,402,409	{string}	Idempotent-Replayed	"true: this answer replays the stored answer of an earlier request with this key"
//	@Produce		json
//	@Router			/v1/orders/{id}/payments [post]
func (h *paymentHandlers) payOrder(c *gin.Context, op *idempotency.Op) (idempotency.Answer, error) {
	var req PayOrderRequest
	if err := decodeJSON(c, &req); err != nil {
		return idempotency.Answer{}, err
	}
	p, err := h.payments.PayOrder(c.Request.Context(), op, MerchantID(c), c.Param("id"), payments.PayInput{PaymentMethod: req.PaymentMethod})
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answers.Payment(p), nil
}

// getPayment godoc
//
//	@Summary		Get a payment
//	@Description	Returns one of the merchant's payments, with the amount refunded so far. Another merchant's payment is not found. A payment whose provider outcome is not known yet shows status processing.
//	@ID				getPayment
//	@Tags			payments
//	@Security		BearerAuth
//	@Param			id	path	string	true	"Payment id"	example(pay_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D)
//	@Produce		json
//	@Success		200	{object}	answers.PaymentResponse
//	@Produce		application/problem+json
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
//	@Failure		404	{object}	Problem404	"not_found"
//	@Failure		500	{object}	Problem500	"internal_error: nothing was stored; the same request may be sent again"
//	@Failure		503	{object}	Problem503	"service_unavailable: the database cannot be reached; nothing was done"
//	@Failure		400	{object}	Problem400	"malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		429	{object}	Problem429	"too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all with none of them idle (with Retry-After)"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			429,503	{integer}	Retry-After	"seconds to wait before retrying"
//	@Produce		json
//	@Router			/v1/payments/{id} [get]
func (h *paymentHandlers) getPayment(c *gin.Context) (idempotency.Answer, error) {
	p, err := h.payments.GetPayment(c.Request.Context(), MerchantID(c), c.Param("id"))
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answers.JSON(http.StatusOK, answers.ToPaymentResponse(p)), nil
}

// getRefund godoc
//
//	@Summary		Get a refund
//	@Description	Returns one of the merchant's refunds; a 502 of a refund names its refund_id. Another merchant's refund is not found. A refund whose provider outcome is not known yet shows status processing.
//	@ID				getRefund
//	@Tags			payments
//	@Security		BearerAuth
//	@Param			id	path	string	true	"Refund id"	example(re_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D)
//	@Produce		json
//	@Success		200	{object}	answers.RefundResponse
//	@Produce		application/problem+json
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
//	@Failure		404	{object}	Problem404	"not_found"
//	@Failure		500	{object}	Problem500	"internal_error: nothing was stored; the same request may be sent again"
//	@Failure		503	{object}	Problem503	"service_unavailable: the database cannot be reached; nothing was done"
//	@Failure		400	{object}	Problem400	"malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		429	{object}	Problem429	"too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all with none of them idle (with Retry-After)"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			429,503	{integer}	Retry-After	"seconds to wait before retrying"
//	@Produce		json
//	@Router			/v1/refunds/{id} [get]
func (h *paymentHandlers) getRefund(c *gin.Context) (idempotency.Answer, error) {
	r, err := h.payments.GetRefund(c.Request.Context(), MerchantID(c), c.Param("id"))
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answers.JSON(http.StatusOK, answers.ToRefundResponse(r)), nil
}

// refundPayment godoc
//
//	@Summary		Refund a payment
//	@Description	Refunds amount (all that is left when omitted) of a succeeded payment through the provider. 201: the refund is final, succeeded or failed; a succeeded refund adds to the payment's amount_refunded, and the payment stays succeeded. 202: the provider's outcome is unknown; retry with the same Idempotency-Key to learn it (202 while unknown, then the final 201). There is no Location header; GET /v1/refunds/{id} reads a refund. 502: the provider did nothing (refund_id names the attempt); retry with the same key until it is canceled (409 refund_canceled; the amount is free again).
//	@Description	Idempotent: a retry with the same Idempotency-Key and body replays a final answer (201, 409) byte for byte with Idempotent-Replayed: true, and the provider refunds at most once per key.
//	@ID				refundPayment
//	@Tags			payments
//	@Accept			json
//	@Security		BearerAuth
//	@Param			Idempotency-Key	header		string	true	"Unique key of this operation, reused on every retry of it: 1-255 visible ASCII characters (0x21-0x7E)"	minlength(1)	maxlength(255)
//	@Param			id				path	string					true	"Payment id"	example(pay_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D)
//	@Param			refund			body	RefundPaymentRequest	false	"How much to refund; an empty body or {} refunds all that is left"
//	@Produce		json
//	@Success		201	{object}	answers.RefundResponse	"succeeded or failed"
//	@Success		202	{object}	answers.RefundResponse	"processing: the provider's outcome is not known yet"
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"validation_failed, idempotency_key_missing or idempotency_key_invalid, or malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
//	@Failure		404	{object}	Problem404	"not_found: no such payment"
//	@Failure		408	{object}	Problem408	"request_timeout: the body did not arrive in time; nothing was done"
//	@Failure		409	{object}	Problem409	"refund_exceeds_payment (stored and replayed), refund_canceled (the key's refund never reached the provider and was canceled; with refund_id; stored), payment_in_progress (the payment is still processing; with Retry-After; not stored), idempotency_request_in_progress (with Retry-After), or idempotency_key_expired (IDEMPOTENCY_TOMBSTONES=true only)"
//	@Failure		413	{object}	Problem413	"request_too_large: the body is over MAX_BODY_BYTES"
//	@Failure		415	{object}	Problem415	"unsupported_media_type: the body's Content-Type is missing or not application/json; nothing was done or stored"
//	@Failure		422	{object}	Problem422	"idempotency_key_reused: the key was used before for a different request"
//	@Failure		429	{object}	Problem429	"rate_limited: more than RATE_LIMIT_NEW_KEYS new keys from this merchant in RATE_LIMIT_WINDOW (100 a second by default; 0 turns the limit off); retries of known keys are never limited, or too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all"
//	@Failure		500	{object}	Problem500	"internal_error: nothing was stored; the same request may be sent again"
//	@Failure		502	{object}	Problem502Refund	"provider_unavailable: nothing was refunded; refund_id names the attempt, which a retry with the same key resumes until it is canceled (PENDING_CANCEL_AFTER)"
//	@Failure		503	{object}	Problem503	"service_unavailable: the database cannot be reached; nothing was done"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			409,429,503	{integer}	Retry-After	"seconds to wait before retrying"
//	@Header			201,409	{string}	Idempotent-Replayed	"true: this answer replays the stored answer of an earlier request with this key"
//	@Produce		json
//	@Router			/v1/payments/{id}/refunds [post]
func (h *paymentHandlers) refundPayment(c *gin.Context, op *idempotency.Op) (idempotency.Answer, error) {
	var req RefundPaymentRequest
	if err := decodeJSON(c, &req); err != nil {
		return idempotency.Answer{}, err
	}
	r, err := h.payments.RefundPayment(c.Request.Context(), op, MerchantID(c), c.Param("id"), payments.RefundInput{Amount: req.Amount})
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answers.Refund(r), nil
}
