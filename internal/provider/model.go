package provider

import (
	"encoding/json"
	"fmt"
)

// Test payment methods. Each behaves the same way every time for a given
// idempotency key, so a test picks the outcome it needs by picking a method.
const (
	// MethodCardVisa succeeds.
	MethodCardVisa = "pm_card_visa"
	// MethodCardDeclined is declined with DeclineCardDeclined.
	MethodCardDeclined = "pm_card_declined"
	// MethodCardInsufficientFunds is declined with DeclineInsufficientFunds.
	MethodCardInsufficientFunds = "pm_card_insufficient_funds"
	// MethodFaultLostResponse charges on the first request under a key, then
	// holds the answer until the client gives up. Later requests under the
	// key answer at once.
	MethodFaultLostResponse = "pm_fault_lost_response"
	// MethodFaultUnavailable answers 503 to the first request under a key,
	// before any effect. Later requests under the key succeed.
	MethodFaultUnavailable = "pm_fault_unavailable"
	// MethodFaultSlow charges when the first request under a key arrives and
	// answers Config.SlowDelay later. Later requests under the key answer at
	// once.
	MethodFaultSlow = "pm_fault_slow"
)

// knownMethods lists every payment method the provider accepts.
var knownMethods = map[string]bool{
	MethodCardVisa:              true,
	MethodCardDeclined:          true,
	MethodCardInsufficientFunds: true,
	MethodFaultLostResponse:     true,
	MethodFaultUnavailable:      true,
	MethodFaultSlow:             true,
}

// ChargeStatus is the final state of a charge. The provider decides it
// synchronously, so there is no pending state.
type ChargeStatus string

// Charge statuses.
const (
	ChargeSucceeded ChargeStatus = "succeeded"
	ChargeDeclined  ChargeStatus = "declined"
)

// Decline codes of declined charges.
const (
	DeclineCardDeclined      = "card_declined"
	DeclineInsufficientFunds = "insufficient_funds"
)

// RefundStatus is the final state of a refund.
type RefundStatus string

// Refund statuses.
const (
	RefundSucceeded RefundStatus = "succeeded"
	RefundFailed    RefundStatus = "failed"
)

// RefundFailureExceedsCharge is the failure code of a refund that would take
// the refunded total above the charge's amount. Such a refund is recorded as
// failed rather than rejected with a 4xx, so that it is a definitive,
// replayable outcome bound to its key that a lookup by key can also find.
const RefundFailureExceedsCharge = "amount_exceeds_charge"

// Event types sent to the webhook.
const (
	EventChargeSucceeded = "charge.succeeded"
	EventChargeDeclined  = "charge.declined"
	EventRefundSucceeded = "refund.succeeded"
)

// Limits on what the provider accepts.
const (
	// MaxIdempotencyKeyLength is the longest Idempotency-Key accepted.
	MaxIdempotencyKeyLength = 255
	// maxReferenceLength bounds references, which callers use for their ids.
	maxReferenceLength = 255
	// maxBodyBytes bounds request bodies; the real ones are tiny.
	maxBodyBytes = 64 << 10
)

// ChargeRequest is the body of POST /v1/charges. The provider compares it
// field by field to decide whether a repeat under the same key is the same
// request.
type ChargeRequest struct {
	// Amount in the currency's minor unit; positive.
	Amount int64 `json:"amount"`
	// Currency is an ISO 4217 code in upper case, e.g. "BRL".
	Currency string `json:"currency"`
	// PaymentMethod is one of the Method* constants.
	PaymentMethod string `json:"payment_method"`
	// Reference is the caller's id for the payment; required.
	Reference string `json:"reference"`
}

// Charge is a charge as the provider's API returns it, in responses, lists
// and webhook events alike. Charges never change once made.
type Charge struct {
	ID     string       `json:"id"`
	Object string       `json:"object"` // always "charge"
	Status ChargeStatus `json:"status"`
	// DeclineCode says why a declined charge was declined; empty otherwise.
	DeclineCode   string `json:"decline_code,omitempty"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	Reference     string `json:"reference"`
	// IdempotencyKey is the key the charge was made under.
	IdempotencyKey string `json:"idempotency_key"`
	// Created is in Unix seconds, as PSPs usually report it.
	Created int64 `json:"created"`
}

// RefundRequest is the body of POST /v1/refunds.
type RefundRequest struct {
	// Charge is the id of a succeeded charge.
	Charge string `json:"charge"`
	// Amount in the charge's minor unit; positive.
	Amount int64 `json:"amount"`
	// Reference is the caller's id for the refund; required.
	Reference string `json:"reference"`
}

// Refund is a refund as the provider's API returns it.
type Refund struct {
	ID     string       `json:"id"`
	Object string       `json:"object"` // always "refund"
	Status RefundStatus `json:"status"`
	// FailureCode says why a failed refund failed; empty otherwise.
	FailureCode string `json:"failure_code,omitempty"`
	Charge      string `json:"charge"`
	Amount      int64  `json:"amount"`
	// Currency is the charge's currency.
	Currency  string `json:"currency"`
	Reference string `json:"reference"`
	// IdempotencyKey is the key the refund was made under.
	IdempotencyKey string `json:"idempotency_key"`
	// Created is in Unix seconds.
	Created int64 `json:"created"`
}

// List is the envelope of list answers. Data is never null.
type List[T any] struct {
	Object string `json:"object"` // always "list"
	Data   []T    `json:"data"`
}

// Ledger is the body of GET /v1/ledger: every charge and refund the provider
// has made, oldest first. A real PSP offers reports rather than this; the mock
// has it so that a fault harness (tools/chaos) can compare the whole ledger with
// the API's database, and find a charge that no payment knows of.
type Ledger struct {
	Object  string   `json:"object"` // always "ledger"
	Charges []Charge `json:"charges"`
	Refunds []Refund `json:"refunds"`
}

// Event is a webhook event. Data.Object holds the charge or refund exactly as
// the API returns it; decode it with Charge or Refund.
type Event struct {
	// ID is the same for every delivery of one event: receivers deduplicate
	// on it.
	ID   string `json:"id"`
	Type string `json:"type"`
	// Created is in Unix seconds.
	Created int64     `json:"created"`
	Data    EventData `json:"data"`
}

// EventData wraps the object an Event is about.
type EventData struct {
	Object json.RawMessage `json:"object"`
}

// Charge decodes the event's object as a charge. It fails for refund events.
func (e Event) Charge() (Charge, error) {
	var c Charge
	if err := json.Unmarshal(e.Data.Object, &c); err != nil {
		return Charge{}, fmt.Errorf("decode charge of event %s: %w", e.ID, err)
	}
	if c.Object != "charge" {
		return Charge{}, fmt.Errorf("event %s of type %s is not about a charge", e.ID, e.Type)
	}
	return c, nil
}

// Refund decodes the event's object as a refund. It fails for charge events.
func (e Event) Refund() (Refund, error) {
	var r Refund
	if err := json.Unmarshal(e.Data.Object, &r); err != nil {
		return Refund{}, fmt.Errorf("decode refund of event %s: %w", e.ID, err)
	}
	if r.Object != "refund" {
		return Refund{}, fmt.Errorf("event %s of type %s is not about a refund", e.ID, e.Type)
	}
	return r, nil
}

// FieldError names one invalid field of a request, in validation problems.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// validate reports every invalid field at once, so a caller fixes them in
// one round.
func (r ChargeRequest) validate() []FieldError {
	var errs []FieldError
	if r.Amount <= 0 {
		errs = append(errs, FieldError{"amount", "must be a positive integer in the currency's minor unit"})
	}
	if !isCurrencyCode(r.Currency) {
		errs = append(errs, FieldError{"currency", "must be an ISO 4217 code in upper case, e.g. BRL"})
	}
	if !knownMethods[r.PaymentMethod] {
		errs = append(errs, FieldError{"payment_method", "unknown payment method"})
	}
	errs = append(errs, validateReference(r.Reference)...)
	return errs
}

func (r RefundRequest) validate() []FieldError {
	var errs []FieldError
	if r.Charge == "" {
		errs = append(errs, FieldError{"charge", "is required"})
	}
	if r.Amount <= 0 {
		errs = append(errs, FieldError{"amount", "must be a positive integer in the charge's minor unit"})
	}
	errs = append(errs, validateReference(r.Reference)...)
	return errs
}

func validateReference(ref string) []FieldError {
	switch {
	case ref == "":
		return []FieldError{{"reference", "is required"}}
	case len(ref) > maxReferenceLength:
		return []FieldError{{"reference", fmt.Sprintf("must be at most %d bytes", maxReferenceLength)}}
	}
	return nil
}

func isCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := range len(s) {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// wellFormed rejects a 2xx body that does not look like a charge: the client
// then cannot know what happened, and must say so.
func (c Charge) wellFormed() error {
	if c.ID == "" || (c.Status != ChargeSucceeded && c.Status != ChargeDeclined) {
		return fmt.Errorf("not a charge (id %q, status %q)", c.ID, c.Status)
	}
	return nil
}

func (r Refund) wellFormed() error {
	if r.ID == "" || (r.Status != RefundSucceeded && r.Status != RefundFailed) {
		return fmt.Errorf("not a refund (id %q, status %q)", r.ID, r.Status)
	}
	return nil
}

func (l List[T]) wellFormed() error {
	if l.Object != "list" {
		return fmt.Errorf("not a list (object %q)", l.Object)
	}
	return nil
}
