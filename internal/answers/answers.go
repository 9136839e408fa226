// Package answers builds what the API answers about a payment and a
// refund: the JSON they are shown as, and the problem of a decline or a
// cancel. It sits below the HTTP layer because such an answer is built
// outside any request too: the charge and refund Effects store it in the
// transaction that settles the payment, whether a request, the reconciler
// or a webhook settles it (payments.WithOutsideCalls). The handlers answer
// with the same functions, so a client's first answer and every replay are
// the same bytes. JSON, the success answer every handler builds, lives here
// for the same reason.
//
// The response types keep their schema names in the OpenAPI document
// (handlers.PaymentResponse, handlers.RefundResponse: the @name comments),
// which generated clients name their types after.
package answers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/problem"
)

// ContentTypeJSON is the Content-Type of every success body: plain
// application/json, as the contract and the OpenAPI document state, never
// gin's "; charset=utf-8" variant (JSON, not c.JSON). One spelling
// everywhere, because the finisher stores the same value for an answer it
// builds outside any request, a replay must not depend on who stored it,
// and generated clients pick the decoder by the exact media type.
const ContentTypeJSON = "application/json"

// JSON is a success answer: v encoded as JSON under ContentTypeJSON,
// final (stored under a key, on a keyed route) unless it is a 202, whose
// outcome is not known yet. header holds name and value pairs (Location,
// ETag).
func JSON(status int, v any, header ...string) idempotency.Answer {
	h := make(http.Header, 1+len(header)/2)
	values := make([]string, 1, 1+len(header)/2) // one array for all
	values[0] = ContentTypeJSON
	h["Content-Type"] = values[0:1:1]
	for i := 0; i+1 < len(header); i += 2 {
		values = append(values, header[i+1])
		h[http.CanonicalHeaderKey(header[i])] = values[len(values)-1 : len(values) : len(values)]
	}
	return idempotency.Answer{Status: status, Header: h, Body: encodeJSON(v), Final: status != http.StatusAccepted}
}

// encodeJSON encodes a response DTO. DTOs hold strings, integers and times
// of this era, which always encode; a failure is a programming error.
func encodeJSON(v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("answers: encode %T: %v", v, err))
	}
	return body
}

// PaymentResponse is a payment as the API shows it.
type PaymentResponse struct {
	ID      string `json:"id" example:"pay_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	Object  string `json:"object" enums:"payment" example:"payment"`
	OrderID string `json:"order_id" example:"ord_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	// Amount is the order's total at the time of payment, in minor units.
	Amount   int64  `json:"amount" example:"2500"`
	Currency string `json:"currency" example:"BRL"`
	// Status is processing while the provider's outcome is unknown; the
	// reconciler, a provider webhook or a retry with the same
	// Idempotency-Key settles it.
	// canceled: it never reached the provider and was abandoned; the
	// order is payable again with a new key.
	Status        string `json:"status" enums:"processing,succeeded,failed,canceled" example:"succeeded"`
	PaymentMethod string `json:"payment_method" example:"pm_card_visa"`
	// ProviderChargeID is the provider's id of the charge; null until the
	// provider has answered.
	ProviderChargeID *string `json:"provider_charge_id" extensions:"x-nullable" example:"ch_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	// DeclineCode says why the provider declined; null unless failed.
	DeclineCode *string `json:"decline_code" extensions:"x-nullable" example:"card_declined"`
	// AmountRefunded is the sum of the payment's succeeded refunds.
	AmountRefunded int64 `json:"amount_refunded" example:"0"`
	// CreatedAt is RFC 3339 in UTC.
	CreatedAt time.Time `json:"created_at" format:"date-time" example:"2025-06-01T12:00:00.123456Z"`
} // @name handlers.PaymentResponse

// RefundResponse is a refund as the API shows it.
type RefundResponse struct {
	ID        string `json:"id" example:"re_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	Object    string `json:"object" enums:"refund" example:"refund"`
	PaymentID string `json:"payment_id" example:"pay_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	Amount    int64  `json:"amount" example:"1000"`
	Currency  string `json:"currency" example:"BRL"`
	// Status is processing while the provider's outcome is unknown. A
	// failed refund gave nothing back; a canceled one never reached the
	// provider, and its amount is free again.
	Status string `json:"status" enums:"processing,succeeded,failed,canceled" example:"succeeded"`
	// CreatedAt is RFC 3339 in UTC.
	CreatedAt time.Time `json:"created_at" format:"date-time" example:"2025-06-01T12:00:00.123456Z"`
} // @name handlers.RefundResponse

// Payment is the answer to POST /v1/orders/{id}/payments for p:
//
//	succeeded              201 payment, Location /v1/payments/{id}
//	pending, processing    202 payment (status processing), Location
//	failed                 402 payment_declined with payment_id and decline_code
//	canceled               409 payment_canceled with payment_id
//
// It is a pure function of p, and the one answer of a payment: the charge
// Effect stores it in the transaction that settles the payment (a
// request's, the reconciler's or a webhook's), and the handler answers
// with it, so the client's first answer and every replay are the same
// bytes.
func Payment(p payments.Payment) idempotency.Answer {
	switch p.Status {
	case payments.StatusFailed:
		return paymentDeclined.answer(fmt.Sprintf("The provider declined the payment (%s). The order is still pending payment: "+
			"try again with another payment method and a new Idempotency-Key.", p.DeclineCode),
			map[string]any{"payment_id": p.ID, "decline_code": p.DeclineCode})
	case payments.StatusCanceled:
		return paymentCanceled.answer("This payment never reached the provider and was abandoned, so it was canceled; "+
			"nothing was charged. The order is payable again: pay it with a new Idempotency-Key.", map[string]any{"payment_id": p.ID})
	}
	return JSON(successStatus(p.Status), ToPaymentResponse(p), "Location", paymentLocation(p.ID))
}

// Refund is the answer to POST /v1/payments/{id}/refunds for r:
//
//	succeeded, failed      201 refund
//	pending, processing    202 refund (status processing)
//	canceled               409 refund_canceled with refund_id
//
// A failed refund is a final outcome like a succeeded one (the contract
// answers it 201), not a problem. There is no Location header, so that the
// answers stored before GET /v1/refunds/{id} existed replay as they were; a
// client follows a 202 by retrying the POST with the same Idempotency-Key
// (202 until the outcome is known, then the final 201), or reads the refund
// by its id. Like Payment it is pure, for the same reason.
func Refund(r payments.Refund) idempotency.Answer {
	if r.Status == payments.StatusCanceled {
		return refundCanceled.answer("This refund never reached the provider and was abandoned, so it was canceled; "+
			"nothing was refunded and its amount is free again. To refund, send a new request with a new Idempotency-Key.",
			map[string]any{"refund_id": r.ID})
	}
	return JSON(successStatus(r.Status), ToRefundResponse(r))
}

// successStatus is 201 once the outcome is known, 202 while it is not.
func successStatus(s payments.Status) int {
	if s.Final() {
		return http.StatusCreated
	}
	return http.StatusAccepted
}

func paymentLocation(id string) string { return "/v1/payments/" + id }

// The problems a payment's or a refund's final outcome is answered with
// when it is not a success. A decline and a cancel are results of the
// domain, not errors, so the HTTP layer's error table has no row for them:
// these are their rows. Each answer is final (stored under the key and
// replayed) and built from the payment or the refund alone.
var (
	paymentDeclined = OutcomeProblem{http.StatusPaymentRequired, problem.CodePaymentDeclined, "Payment declined"}
	paymentCanceled = OutcomeProblem{http.StatusConflict, problem.CodePaymentCanceled, "Payment canceled"}
	refundCanceled  = OutcomeProblem{http.StatusConflict, problem.CodeRefundCanceled, "Refund canceled"}
)

// OutcomeProblem is the status, code and title of an outcome's problem.
type OutcomeProblem struct {
	Status      int
	Code, Title string
}

// OutcomeProblems lists the outcomes' problems, for the HTTP layer's list
// of every problem the API answers with (KeptConflict and the reference's
// audit read it).
func OutcomeProblems() []OutcomeProblem {
	return []OutcomeProblem{paymentDeclined, paymentCanceled, refundCanceled}
}

// answer is the outcome's final problem+json answer with detail and the
// extension members extra.
func (o OutcomeProblem) answer(detail string, extra map[string]any) idempotency.Answer {
	p := problem.New(o.Status, o.Code, o.Title, detail)
	p.Extra = extra
	return Problem(p, nil, true)
}

// Problem is p as an answer: its status, its body under
// problem.ContentType, header's other fields (nil: none), final (stored
// under the key and replayed) or not. Every problem the API answers with
// is built here, the HTTP layer's error table's and the outcomes'.
func Problem(p problem.Problem, header http.Header, final bool) idempotency.Answer {
	if header == nil {
		header = make(http.Header, 1)
	}
	header["Content-Type"] = []string{problem.ContentType}
	return idempotency.Answer{Status: p.Status, Header: header, Body: problem.Encode(p), Final: final}
}

// clientStatus is the status a client sees. pending (the row exists, the
// provider call is not known to have happened) and processing (a call was
// made, its outcome unknown) differ only inside the service; to a client
// both mean "not settled yet, ask again", so the API shows one state.
func clientStatus(s payments.Status) string {
	if s == payments.StatusPending {
		return string(payments.StatusProcessing)
	}
	return string(s)
}

// optional is nil for "", so that an unknown value is null on the wire.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ToPaymentResponse is p as the API shows it (the body of Payment's
// success answers and of GET /v1/payments/{id}).
func ToPaymentResponse(p payments.Payment) PaymentResponse {
	resp := PaymentResponse{
		ID:               p.ID,
		Object:           "payment",
		OrderID:          p.OrderID,
		Amount:           p.Amount,
		Currency:         p.Currency,
		Status:           clientStatus(p.Status),
		PaymentMethod:    p.PaymentMethod,
		ProviderChargeID: optional(p.ProviderChargeID),
		AmountRefunded:   p.AmountRefunded,
		CreatedAt:        p.CreatedAt.UTC(),
	}
	if p.Status == payments.StatusFailed {
		resp.DeclineCode = optional(p.DeclineCode)
	}
	return resp
}

// ToRefundResponse is r as the API shows it.
func ToRefundResponse(r payments.Refund) RefundResponse {
	return RefundResponse{
		ID:        r.ID,
		Object:    "refund",
		PaymentID: r.PaymentID,
		Amount:    r.Amount,
		Currency:  r.Currency,
		Status:    clientStatus(r.Status),
		CreatedAt: r.CreatedAt.UTC(),
	}
}
