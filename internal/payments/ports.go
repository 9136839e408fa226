package payments

import (
	"context"
	"errors"

	"github.com/idemkeys/payments/internal/idempotency"
)

// Provider is the payment service provider, as payments needs it. The
// provider package's client, through a small adapter, implements it.
//
// Every call sends the provider a key of ours; the provider honours it, so
// repeating a call under the same key never makes a second charge or refund.
// Errors come in three kinds, and the whole recovery design rests on telling
// them apart:
//   - nil: a definitive answer (the result says succeeded or declined);
//   - ErrProviderNotExecuted: the call did nothing (refused, 503 before any
//     effect, circuit open): safe to try again, nothing to reconcile;
//   - ErrProviderUnknown: the call may or may not have happened (a timeout,
//     a connection lost after sending): ask the provider, or repeat the call
//     under the same key.
type Provider interface {
	// Charge charges under key. It returns ErrProviderNotExecuted or
	// ErrProviderUnknown; a decline is a result, not an error.
	Charge(ctx context.Context, key string, req ChargeRequest) (ChargeResult, error)
	// FindCharge returns the charge made under key. It returns
	// ErrProviderNoSuchCall when there is none, ErrProviderNotExecuted or
	// ErrProviderUnknown.
	FindCharge(ctx context.Context, key string) (ChargeResult, error)
	// Refund refunds under key. Same errors as Charge.
	Refund(ctx context.Context, key string, req RefundRequest) (RefundResult, error)
	// FindRefund returns the refund made under key. Same errors as
	// FindCharge.
	FindRefund(ctx context.Context, key string) (RefundResult, error)
}

// Errors of a Provider. Not executed and no such call are the idempotency
// core's own (the skeleton of outside calls sorts by them); any other error
// of a call leaves its outcome unknown.
var (
	ErrProviderNotExecuted = idempotency.ErrNotExecuted
	ErrProviderUnknown     = errors.New("provider outcome unknown")
	ErrProviderNoSuchCall  = idempotency.ErrNoSuchCall
)

// ChargeRequest asks the provider to charge.
type ChargeRequest struct {
	Amount        int64
	Currency      string
	PaymentMethod string
	// Reference is our payment id.
	Reference string
	// MerchantID is whose call it is: the provider's client counts its
	// failures against that merchant alone (its circuit breaker).
	MerchantID string
}

// ChargeResult is the provider's definitive answer to a charge.
type ChargeResult struct {
	ChargeID string
	// Succeeded is false for a decline.
	Succeeded   bool
	DeclineCode string
	Reference   string
	Key         string
	// Amount and Currency are what the provider charged (zero and "" when
	// it refused the request outright and charged nothing).
	Amount   int64
	Currency string
}

// RefundRequest asks the provider to refund part of a charge.
type RefundRequest struct {
	ChargeID string
	Amount   int64
	// Reference is our refund id.
	Reference string
	// MerchantID is whose call it is, as in ChargeRequest.
	MerchantID string
}

// RefundResult is the provider's definitive answer to a refund.
type RefundResult struct {
	RefundID  string
	Succeeded bool
	Reference string
	Key       string
	// Amount and Currency are what the provider refunded (zero and "" for
	// a refusal).
	Amount   int64
	Currency string
}
