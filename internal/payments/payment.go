package payments

import (
	"errors"
	"fmt"
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
//	   │  │                        ▲
//	   │  └──outcome unknown──▶ processing
//	   └──abandoned──▶ canceled
//
// pending means the row exists and the provider call has not been made, or
// may have been made by a process that died before it could record the
// outcome; processing means a call was made and its outcome is unknown
// (a timeout, a lost response). canceled means it never reached the
// provider (the provider confirmed it has no call under the key) and no
// request has worked on it for PENDING_CANCEL_AFTER: the reconciler ended
// it. succeeded, failed and canceled are final: nothing moves a payment out
// of them, whatever arrives late or out of order. Only pending may be
// canceled: a processing payment may have been charged, and only the
// provider's answer settles it.
type Status string

// The states of the machine above.
const (
	StatusPending    Status = "pending"
	StatusProcessing Status = "processing"
	StatusSucceeded  Status = "succeeded"
	StatusFailed     Status = "failed"
	StatusCanceled   Status = "canceled"
)

// Final reports whether s can no longer change.
func (s Status) Final() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCanceled
}

// canMove is the transition table. Staying put is allowed (a repeat),
// going back never is.
func (s Status) canMove(to Status) bool {
	switch s {
	case StatusPending:
		return true
	case StatusProcessing:
		return to != StatusPending && to != StatusCanceled
	default:
		return s == to
	}
}

// sources lists the states a payment or refund may move to s from: the
// condition of the conditional update that moves it, so the database refuses
// what the table refuses, whatever races.
func (s Status) sources() []Status {
	var from []Status
	for _, st := range []Status{StatusPending, StatusProcessing, StatusSucceeded, StatusFailed, StatusCanceled} {
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
	// LastAttemptAt is when a request last worked on the payment: its
	// creation, or a retry under its key resuming it. The reconciler
	// cancels a pending payment only after PENDING_CANCEL_AFTER of none.
	LastAttemptAt time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
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
	// LastAttemptAt is as for a Payment.
	LastAttemptAt time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// PayInput is what a client sends to pay an order.
type PayInput struct {
	PaymentMethod string
}

// MaxPaymentMethodLength bounds a payment method token.
const MaxPaymentMethodLength = 255

// MaxRefundAmount bounds a refund's amount: no payment can be larger (an
// order's total is at most MaxItems lines of MaxQuantity × MaxUnitAmount, and
// MaxAmountTotal in all), so a larger one is refused as invalid before the
// payment is read.
const MaxRefundAmount = MaxUnitAmount * MaxQuantity

// Validate checks the input's shape; whether the provider knows the method
// is the provider's to say (as a decline).
func (in PayInput) Validate() error {
	var fe fieldErrors
	switch {
	case in.PaymentMethod == "":
		fe.add("payment_method", "is required")
	case len(in.PaymentMethod) > MaxPaymentMethodLength || !visibleASCII(in.PaymentMethod):
		fe.add("payment_method", fmt.Sprintf("must be 1 to %d visible ASCII characters", MaxPaymentMethodLength))
	case !paymentMethodRE.MatchString(in.PaymentMethod):
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
	if in.Amount != nil && (*in.Amount <= 0 || *in.Amount > MaxRefundAmount) {
		fe.add("amount", fmt.Sprintf("must be a positive integer in the currency's minor unit, at most %d", int64(MaxRefundAmount)))
	}
	return fe.err()
}

// Errors of payments and refunds (see also errors.go).
var (
	// ErrOrderAlreadyPaid: the order is paid. Final.
	ErrOrderAlreadyPaid = errors.New("order already paid")
	// ErrPaymentInProgress: the order or the payment has a payment or
	// refund in flight (pending or processing); the conflict clears when
	// it settles, so it is temporary.
	ErrPaymentInProgress = errors.New("a payment or refund of this order is in flight")
	// ErrRefundExceedsPayment: more than is left to refund, or the payment
	// has not succeeded (and is not in flight either).
	ErrRefundExceedsPayment = errors.New("refund exceeds what is left of the payment")
	// ErrProviderUnavailable: the provider did not execute the call (down,
	// refusing, circuit open). Nothing was charged; the same key may retry.
	ErrProviderUnavailable = errors.New("payment provider unavailable")
)

// UnavailableError is a provider that did nothing (ErrProviderUnavailable,
// which it wraps with the cause): it names the payment or refund that the
// same key resumes.
type UnavailableError struct {
	PaymentID string
	RefundID  string
	Err       error
}

func (e *UnavailableError) Error() string {
	id := e.PaymentID
	if e.RefundID != "" {
		id = e.RefundID
	}
	return fmt.Sprintf("%s: %v: %v", id, ErrProviderUnavailable, e.Err)
}

// Unwrap lets errors.Is match ErrProviderUnavailable and the cause.
func (e *UnavailableError) Unwrap() []error { return []error{ErrProviderUnavailable, e.Err} }
