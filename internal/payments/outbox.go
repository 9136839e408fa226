package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Event types written to the outbox.
const (
	EventOrderCreated     = "order.created"
	EventCustomerCreated  = "customer.created"
	EventPaymentSucceeded = "payment.succeeded"
	EventPaymentFailed    = "payment.failed"
	EventRefundSucceeded  = "refund.succeeded"
	EventPaymentCanceled  = "payment.canceled"
	EventRefundCanceled   = "refund.canceled"
)

// Event is a domain event, written to the outbox in the transaction of the
// change it describes.
type Event struct {
	ID         string
	MerchantID string
	Type       string
	// Payload is the event's JSON body.
	Payload []byte
	// TraceParent is the W3C trace context of the transaction that wrote
	// the event ("" when it was not traced); the dispatcher sends it on
	// with the event, and a consumer continues the trace.
	TraceParent string
	CreatedAt   time.Time
}

// EventStore appends events to the outbox (paymentsdb.Store implements it).
type EventStore interface {
	// AppendEvent inserts ev, joining the transaction carried by ctx.
	AppendEvent(ctx context.Context, ev Event) error
}

// event builds an outbox event about one resource.
func (s *Service) event(merchantID, eventType string, payload any, now time.Time) (Event, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return Event{}, fmt.Errorf("encode %s event: %w", eventType, err)
	}
	id, err := s.ids.newID("evt_", now)
	if err != nil {
		return Event{}, err
	}
	return Event{ID: id, MerchantID: merchantID, Type: eventType, Payload: body, CreatedAt: now}, nil
}

// emit appends an event in the caller's transaction; without an event store
// (tests of the order rules alone) it does nothing.
func (s *Service) emit(ctx context.Context, merchantID, eventType string, payload any, now time.Time) error {
	if s.events == nil {
		return nil
	}
	ev, err := s.event(merchantID, eventType, payload, now)
	if err != nil {
		return err
	}
	ev.TraceParent = s.tracer.TraceParent(ctx)
	return s.events.AppendEvent(ctx, ev)
}

// The payloads: stable, small, and free of anything secret.
type orderEvent struct {
	ID          string `json:"id"`
	CustomerID  string `json:"customer_id"`
	Currency    string `json:"currency"`
	AmountTotal int64  `json:"amount_total"`
	Status      string `json:"status"`
}

type customerEvent struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

type paymentEvent struct {
	ID               string `json:"id"`
	OrderID          string `json:"order_id"`
	Amount           int64  `json:"amount"`
	Currency         string `json:"currency"`
	Status           string `json:"status"`
	ProviderChargeID string `json:"provider_charge_id,omitempty"`
	DeclineCode      string `json:"decline_code,omitempty"`
}

type refundEvent struct {
	ID        string `json:"id"`
	PaymentID string `json:"payment_id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Status    string `json:"status"`
}

// WithEvents turns on the transactional outbox.
func WithEvents(store EventStore) Option {
	return func(s *Service) { s.events = store }
}
