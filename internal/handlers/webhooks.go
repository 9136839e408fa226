package handlers

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/problem"
)

// Limits of a webhook delivery, which arrives unauthenticated until its
// signature is checked: the body is read whole before that check, so it is
// small (an event is under 2 KiB) and must arrive in time.
const (
	WebhookMaxBodyBytes = 64 << 10
	WebhookReadTimeout  = 5 * time.Second
)

// HeaderProviderSignature carries the provider's signature of a webhook:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">".
const HeaderProviderSignature = "Provider-Signature"

// Provider event types the API acts on. Others are acknowledged and
// ignored, so that the provider can add types without its deliveries
// failing here.
const (
	eventChargeSucceeded = "charge.succeeded"
	eventChargeDeclined  = "charge.declined"
	eventRefundSucceeded = "refund.succeeded"
)

// ProviderEventRequest is the body of POST /v1/webhooks/provider. Unlike a
// client request, an event may carry members it does not declare (here, in
// data and in data.object): they are skipped, because the signature already
// vouches for the sender, and a receiver that broke on every new member
// would break on the provider's schedule.
type ProviderEventRequest struct {
	// ID is the same on every delivery of one event; the API applies each
	// id once.
	ID string `json:"id" minLength:"1" example:"evt_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	// Type says what happened. The API acts on charge.succeeded,
	// charge.declined and refund.succeeded; any other type is acknowledged
	// and ignored, whatever its data.object holds.
	Type string `json:"type" minLength:"1" example:"charge.succeeded"`
	// Created is in Unix seconds.
	Created int64             `json:"created" example:"1748779200"`
	Data    ProviderEventData `json:"data"`
}

func (ProviderEventRequest) acceptsUnknownMembers() {}

// ProviderEventData wraps the object an event is about.
type ProviderEventData struct {
	// Object is the charge (charge.* events) or the refund (refund.*
	// events), as the provider's API returns it.
	Object json.RawMessage `json:"object" swaggertype:"object"`
}

func (ProviderEventData) acceptsUnknownMembers() {}

// ProviderCharge is the data.object of a charge event: the part of the
// provider's charge the API reads. scripts/openapifix writes its schema
// (swag sees no annotation that names it).
type ProviderCharge struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Status string `json:"status"`
	Amount int64  `json:"amount"`
	// Currency is compared with the payment's as it is.
	Currency       string `json:"currency"`
	DeclineCode    string `json:"decline_code" validate:"optional"`
	Reference      string `json:"reference"`
	IdempotencyKey string `json:"idempotency_key" validate:"optional"`
}

func (ProviderCharge) acceptsUnknownMembers() {}

// ProviderRefund is the data.object of a refund event: the part of the
// provider's refund the API reads. Its schema comes from scripts/openapifix
// too.
type ProviderRefund struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Status         string `json:"status"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Reference      string `json:"reference"`
	IdempotencyKey string `json:"idempotency_key" validate:"optional"`
}

func (ProviderRefund) acceptsUnknownMembers() {}

// WebhookAck acknowledges an event: it was applied now, applied before, or
// is of a type the API ignores. The provider stops delivering it.
type WebhookAck struct {
	Received bool `json:"received" example:"true"`
}

// webhookHandlers serves the provider's webhook.
type webhookHandlers struct {
	payments PaymentService
	verify   func(header string, body []byte) error
}

// receiveProviderEvent godoc
//
//	@Summary		Receive a provider event
//	@Description	The payment provider's webhook: it reports charges and refunds, among them the outcomes a request could not learn (a lost answer, a timeout). It takes no API key; the Provider-Signature header authenticates it, checked against the raw body before anything is parsed. A signed event is a hint, not the truth: the API asks the provider's API about the payment or refund it names (by our provider key) and applies what the provider says, after checking its amount and currency against ours; an event the provider does not confirm changes nothing and is not recorded (answered 200). When the provider cannot be asked, the answer is 503 provider_unavailable and nothing is applied, so the provider delivers again. Delivery is at least once: each confirmed event id is applied once, and every delivery of it is answered 200. Events never move a payment or refund backwards. Unknown event types are answered 200 and ignored. The body is read like a client's (required members, whole numbers in any spelling), except that members the API does not know are skipped: data.object is the charge (charge.succeeded, charge.declined) or the refund (refund.succeeded) with the status its type names, or any object for another type.
//	@ID				receiveProviderEvent
//	@Tags			webhooks
//	@Accept			json
//	@Param			Provider-Signature	header	string					true	"`t=<unix seconds>,v1=<hex>`, where hex is the HMAC-SHA256, with the shared secret, of the string made of t, a dot and the raw body. Refused (401) when t is more than 5 minutes older or newer than the API's clock."
//	@Param			event				body	ProviderEventRequest	true	"The event"
//	@Produce		json
//	@Success		200	{object}	WebhookAck
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"validation_failed: the signed body is not an event the API can read, or malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		401	{object}	Problem401	"invalid_signature"
//	@Failure		408	{object}	Problem408	"request_timeout: the body did not arrive in time; nothing was done"
//	@Failure		413	{object}	Problem413	"request_too_large: the body is over MAX_BODY_BYTES"
//	@Failure		415	{object}	Problem415	"unsupported_media_type: the body's Content-Type is missing or not application/json; nothing was done or stored"
//	@Failure		500	{object}	Problem500	"internal_error; the provider delivers again"
//	@Failure		503	{object}	Problem503	"service_unavailable (the database), or provider_unavailable (the provider could not be asked about the event), with Retry-After; nothing was applied and the provider delivers again"
//	@Failure		429	{object}	Problem429	"too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all with none of them idle (with Retry-After)"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			429,503	{integer}	Retry-After	"seconds to wait before retrying"
//	@Produce		json
//	@Router			/v1/webhooks/provider [post]
func (h *webhookHandlers) receiveProviderEvent(c *gin.Context) (idempotency.Answer, error) {
	// The signature covers the exact bytes sent, so they are read whole and
	// verified before any parsing: nothing unauthenticated reaches a parser.
	// The read runs under the route's own deadline (readDeadline).
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return idempotency.Answer{}, &bodyReadError{err: err}
	}
	if err := h.verify(c.GetHeader(HeaderProviderSignature), body); err != nil {
		// The reason (missing, malformed, mismatch, expired) helps whoever
		// runs the API and would help a forger: logged, not answered.
		loggerFrom(c).WarnContext(c.Request.Context(), "webhook refused", "error", err)
		return idempotency.Answer{}, fmt.Errorf("%w: %w", errInvalidSignature, err)
	}
	ev, ok, err := toProviderEvent(body)
	if err != nil {
		return idempotency.Answer{}, err
	}
	if !ok {
		loggerFrom(c).DebugContext(c.Request.Context(), "webhook ignored", "event_id", ev.ID, "type", ev.Type)
		return answers.JSON(http.StatusOK, WebhookAck{Received: true}), nil
	}
	outcome, err := h.payments.ApplyProviderEvent(c.Request.Context(), ev)
	if err != nil {
		// Not acknowledged: the provider delivers the event again later
		// (503 when it could not be asked about the event).
		return idempotency.Answer{}, err
	}
	// A forged or mismatched event is acknowledged too: delivering it
	// again would change nothing. The service has logged and counted it.
	loggerFrom(c).InfoContext(c.Request.Context(), "webhook received", "event_id", ev.ID, "type", ev.Type, "outcome", string(outcome))
	return answers.JSON(http.StatusOK, WebhookAck{Received: true}), nil
}

// toProviderEvent reads a verified event body. ok is false for an event
// type the API ignores (ev then holds only its id and type). It returns a
// *requestError for a body that is not a readable event: the provider
// signed something the API does not understand, which is worth a 400 that
// shows in the provider's delivery log rather than a silent 200.
func toProviderEvent(body []byte) (ev payments.ProviderEvent, ok bool, err error) {
	var req ProviderEventRequest
	if err := decodeStrict(body, &req); err != nil {
		return ev, false, err
	}
	var b eventBinder
	b.required("id", req.ID)
	b.required("type", req.Type)
	if len(b.fields) > 0 {
		return ev, false, &requestError{fields: b.fields}
	}
	ev = payments.ProviderEvent{ID: req.ID, Type: req.Type}

	switch req.Type {
	case eventChargeSucceeded, eventChargeDeclined:
		var ch ProviderCharge
		if err := decodeStrictAt("data.object", req.Data.Object, &ch); err != nil {
			return ev, false, err
		}
		b.required("data.object.id", ch.ID)
		b.required("data.object.reference", ch.Reference)
		b.equal("data.object.object", ch.Object, "charge")
		// The type and the object must agree: an event that says succeeded
		// about a declined charge is not one to act on.
		want := "succeeded"
		if req.Type == eventChargeDeclined {
			want = "declined"
		}
		b.equal("data.object.status", ch.Status, want)
		b.optional("data.object.decline_code", ch.DeclineCode)
		b.optional("data.object.idempotency_key", ch.IdempotencyKey)
		ev.Charge = &payments.ChargeResult{
			ChargeID:    ch.ID,
			Succeeded:   ch.Status == "succeeded",
			DeclineCode: ch.DeclineCode,
			Reference:   ch.Reference,
			Key:         ch.IdempotencyKey,
			Amount:      ch.Amount,
			Currency:    ch.Currency,
		}

	case eventRefundSucceeded:
		var rf ProviderRefund
		if err := decodeStrictAt("data.object", req.Data.Object, &rf); err != nil {
			return ev, false, err
		}
		b.required("data.object.id", rf.ID)
		b.required("data.object.reference", rf.Reference)
		b.equal("data.object.object", rf.Object, "refund")
		b.equal("data.object.status", rf.Status, "succeeded")
		b.optional("data.object.idempotency_key", rf.IdempotencyKey)
		ev.Refund = &payments.RefundResult{
			RefundID:  rf.ID,
			Succeeded: rf.Status == "succeeded",
			Reference: rf.Reference,
			Key:       rf.IdempotencyKey,
			Amount:    rf.Amount,
			Currency:  rf.Currency,
		}

	default:
		return ev, false, nil
	}
	if len(b.fields) > 0 {
		return payments.ProviderEvent{}, false, &requestError{fields: b.fields}
	}
	return ev, true, nil
}

// eventBinder collects what is wrong with an event, like binder does for
// client requests.
type eventBinder struct {
	fields []problem.FieldError
}

// required refuses an empty value, and one that is not visible ASCII: the
// provider's ids, types and references all are, and NUL or invalid UTF-8
// would make PostgreSQL fail the event with a 500 on every delivery.
func (b *eventBinder) required(field, value string) {
	switch {
	case value == "":
		b.fields = append(b.fields, problem.FieldError{Field: field, Message: "is required"})
	case !visibleASCII(value):
		b.fields = append(b.fields, problem.FieldError{Field: field, Message: "must be visible ASCII"})
	}
}

// optional is required for a value that may be empty.
func (b *eventBinder) optional(field, value string) {
	if value != "" {
		b.required(field, value)
	}
}

func (b *eventBinder) equal(field, value, want string) {
	if value != want {
		b.fields = append(b.fields, problem.FieldError{Field: field, Message: fmt.Sprintf("must be %q for this event type", want)})
	}
}
