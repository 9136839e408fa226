package payments

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Id prefixes of payments and refunds.
const (
	paymentIDPrefix = "pay_"
	refundIDPrefix  = "re_"
)

// Status is where a payment or a refund is in its life:
//
//	pending ──provider call──▶ succeeded | failed
//	   │                           ▲
//	   └──outcome unknown──▶ processing
//
// pending means the row exists and the provider call has not been made, or
// may have been made by a process that died before it could record the
// outcome; processing means a call was made and its outcome is unknown
// (a timeout, a lost response). succeeded and failed are final: nothing
// moves a payment out of them, whatever arrives late or out of order.
type Status string

// The states of the machine above.
const (
	StatusPending    Status = "pending"
	StatusProcessing Status = "processing"
	StatusSucceeded  Status = "succeeded"
	StatusFailed     Status = "failed"
)

// Final reports whether s can no longer change.
func (s Status) Final() bool { return s == StatusSucceeded || s == StatusFailed }

// canMove is the transition table. Staying put is allowed (a repeat),
// going back never is.
func (s Status) canMove(to Status) bool {
	switch s {
	case StatusPending:
		return true
	case StatusProcessing:
		return to != StatusPending
	default:
		return s == to
	}
}

// sources lists the states a payment or refund may move to s from: the
// condition of the conditional update that moves it, so the database refuses
// what the table refuses, whatever races.
func (s Status) sources() []Status {
	var from []Status
	for _, st := range []Status{StatusPending, StatusProcessing, StatusSucceeded, StatusFailed} {
		if st != s && st.canMove(s) {
			from = append(from, st)
		}
	}
	return from
}

// Payment is one attempt to charge an order at the provider.
type Payment struct {
	ID            string
	MerchantID    string
	OrderID       string
	Amount        int64
	Currency      string
	PaymentMethod string
	Status        Status
	// ProviderKey is the Idempotency-Key we send the provider. It is
	// derived from the payment and stored with it, so every retry and
	// every reconciliation asks the provider about the same charge.
	ProviderKey      string
	ProviderChargeID string
	DeclineCode      string
	AmountRefunded   int64
	// IdempotencyKey is the client's key of the request that made the
	// payment: the record to finish when the outcome arrives later.
	IdempotencyKey string
	// TraceParent is the W3C trace context of the request that made the
	// payment ("" when it was not traced): the reconciler's and the
	// finisher's spans link back to it.
	TraceParent string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Refund gives back some or all of a succeeded payment.
type Refund struct {
	ID               string
	MerchantID       string
	PaymentID        string
	Amount           int64
	Currency         string
	Status           Status
	ProviderKey      string
	ProviderRefundID string
	IdempotencyKey   string
	// TraceParent is the trace context of the request that made the
	// refund, as for a Payment.
	TraceParent string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// PayInput is what a client sends to pay an order.
type PayInput struct {
	PaymentMethod string
}

// MaxPaymentMethodLength bounds a payment method token.
const MaxPaymentMethodLength = 255

// Validate checks the input's shape; whether the provider knows the method
// is the provider's to say (as a decline).
func (in PayInput) Validate() error {
	var fe fieldErrors
	switch {
	case in.PaymentMethod == "":
		fe.add("payment_method", "is required")
	case len(in.PaymentMethod) > MaxPaymentMethodLength || !visibleASCII(in.PaymentMethod):
		fe.add("payment_method", fmt.Sprintf("must be 1 to %d visible ASCII characters", MaxPaymentMethodLength))
	case !strings.HasPrefix(in.PaymentMethod, "pm_"):
		fe.add("payment_method", `must be a payment method token starting with "pm_"`)
	}
	return fe.err()
}

// RefundInput is what a client sends to refund a payment. A nil Amount
// refunds all that is left.
type RefundInput struct {
	Amount *int64
}

// Validate checks the input's shape; the amount left is checked under a row
// lock when the refund is reserved.
func (in RefundInput) Validate() error {
	var fe fieldErrors
	if in.Amount != nil && (*in.Amount <= 0 || *in.Amount > MaxUnitAmount*MaxQuantity) {
		fe.add("amount", "must be a positive integer in the currency's minor unit")
	}
	return fe.err()
}

// Errors of payments and refunds (see also errors.go).
var (
	// ErrOrderAlreadyPaid: the order is paid, or has a payment in flight.
	ErrOrderAlreadyPaid = errors.New("order already paid or has a payment in flight")
	// ErrRefundExceedsPayment: more than is left to refund, or the payment
	// has not succeeded.
	ErrRefundExceedsPayment = errors.New("refund exceeds what is left of the payment")
	// ErrProviderUnavailable: the provider did not execute the call (down,
	// refusing, circuit open). Nothing was charged; the same key may retry.
	ErrProviderUnavailable = errors.New("payment provider unavailable")
	// ErrPaymentDeclined: the provider declined; *DeclinedError says more.
	ErrPaymentDeclined = errors.New("payment declined")
)

// DeclinedError is a final decline. It wraps ErrPaymentDeclined.
type DeclinedError struct {
	PaymentID   string
	DeclineCode string
}

func (e *DeclinedError) Error() string {
	return fmt.Sprintf("payment %s declined: %s", e.PaymentID, e.DeclineCode)
}

// Unwrap lets errors.Is(err, ErrPaymentDeclined) match.
func (e *DeclinedError) Unwrap() error { return ErrPaymentDeclined }
