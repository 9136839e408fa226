package payments

import (
	"context"
	"errors"
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

// Errors of a Provider.
var (
	ErrProviderNotExecuted = errors.New("provider did not execute the call")
	ErrProviderUnknown     = errors.New("provider outcome unknown")
	ErrProviderNoSuchCall  = errors.New("provider has no call under that key")
)

// ChargeRequest asks the provider to charge.
type ChargeRequest struct {
	Amount        int64
	Currency      string
	PaymentMethod string
	// Reference is our payment id.
	Reference string
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

// Recovery is the idempotency layer's memory of how far the current keyed
// operation got (idempotency.Lease implements it). Checkpoint is called inside
// the transaction that makes a step durable, so the step and the point commit
// together; it fails when another request has taken the operation over, and
// the transaction must then roll back.
type Recovery interface {
	// RecoveryPoint is the last point recorded: its step, and the id of
	// the payment or refund that step made; resourceID is "" for a new
	// operation.
	RecoveryPoint() (step, resourceID string)
	// Checkpoint records the step reached and the id of what it made. It
	// returns an error (the idempotency layer's ErrFenced) when this request
	// no longer owns the operation.
	Checkpoint(ctx context.Context, step, resourceID string) error
}

// Resolved is told about a payment or refund that reached a final state
// outside the request that started it (the reconciler, a webhook), so that
// the client's idempotency record can be finished with the final answer.
type Resolved interface {
	PaymentResolved(ctx context.Context, p Payment)
	RefundResolved(ctx context.Context, r Refund)
}

// OpenOperation is an operation whose client record is still open although
// no request works on it any more: the request ended (it crashed, or lost
// the database) before its answer was stored. ResourceID is the payment or
// refund its last recovery point names.
type OpenOperation struct {
	MerchantID string
	ResourceID string
}

// OpenOperations lists open operations for the reconciler, so that one
// which settled before its request ended gets its answer stored even if
// the client never retries.
type OpenOperations interface {
	// Abandoned returns up to limit open operations, the longest
	// abandoned first, or a store error.
	Abandoned(ctx context.Context, limit int) ([]OpenOperation, error)
}

// KeyFence lets the reconciler cancel an abandoned payment or refund without
// racing a late retry of its client's key: it takes the key's open record
// over first (a retry then waits, or finds the record taken), and the cancel
// re-checks the attempt time inside its own transaction, where it also
// stores the key's final answer under the fence. The idempotency layer,
// through the HTTP layer's answers, implements it (handlers.RecordFence).
type KeyFence interface {
	// HoldPayment takes over the open record of p's key whose recovery
	// point names p. It returns a nil Hold and a nil error when there is no
	// such record (nothing can resume the payment then), ErrKeyBusy when a
	// request is working on it now, or a store error.
	HoldPayment(ctx context.Context, p Payment) (Hold, error)
	// HoldRefund is HoldPayment for a refund.
	HoldRefund(ctx context.Context, r Refund) (Hold, error)
}

// Hold is a key's record taken over by KeyFence.
type Hold interface {
	// Canceled stores the final answer of the canceled payment or refund
	// (the one held), in the transaction carried by ctx. It returns an
	// error when the hold was lost (a retry took the record over after
	// the hold's lock ran out): the transaction must then roll back.
	Canceled(ctx context.Context) error
	// Published is called after the transaction of Canceled committed.
	Published()
	// Release gives the record back unchanged, for the next retry.
	Release(ctx context.Context)
}

// ErrKeyBusy: a request is working on the operation under its key right
// now; the reconciler leaves it to that request.
var ErrKeyBusy = errors.New("a request is working on this key")
