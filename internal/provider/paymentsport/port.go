// Package paymentsport adapts the provider's client to the port the payments
// service consumes (payments.Provider). It lives apart from package provider
// so that the mock provider's own binary does not link the payments domain
// and its database drivers.
package paymentsport

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/provider"
)

// DeclineInvalidPaymentMethod is the decline code of a charge the provider
// refused because it does not know the payment method.
const DeclineInvalidPaymentMethod = "invalid_payment_method"

// PaymentsPort is the Client as the payments service consumes it
// (payments.Provider). It translates in both directions: our requests into
// the provider's, and the client's three kinds of error into the payments
// sentinels the recovery design rests on:
//
//	ErrNotExecuted      →  payments.ErrProviderNotExecuted
//	ErrUnknownOutcome   →  payments.ErrProviderUnknown
//	404 on a lookup     →  payments.ErrProviderNoSuchCall
//
// Errors are wrapped with both sentinels visible, so errors.Is works with the
// provider's and the payments' alike and logs keep the provider's reason.
//
// A definitive refusal (*APIError, a 4xx) of a charge or refund is not an
// error but a failed result, as a real PSP reports a bad card as a decline:
// the provider has answered for good and done nothing, and the operation has
// to end failed rather than be retried. The one exception is
// idempotency_key_reused, see unknownIfKeyReused.
type PaymentsPort struct {
	client *provider.Client
}

var _ payments.Provider = (*PaymentsPort)(nil)

// New returns the provider's client as a payments.Provider.
func New(c *provider.Client) *PaymentsPort { return &PaymentsPort{client: c} }

// Charge charges under key. A declined charge, and a charge the provider
// refused outright (see declineCode), come back with Succeeded false and a
// nil error. It returns errors wrapping payments.ErrProviderNotExecuted or
// payments.ErrProviderUnknown.
func (p *PaymentsPort) Charge(ctx context.Context, key string, req payments.ChargeRequest) (payments.ChargeResult, error) {
	ch, err := p.client.CreateCharge(provider.WithMerchant(ctx, req.MerchantID), key, provider.ChargeRequest{
		Amount:        req.Amount,
		Currency:      req.Currency,
		PaymentMethod: req.PaymentMethod,
		Reference:     req.Reference,
	})
	var refused *provider.APIError
	switch {
	case err == nil:
		return toChargeResult(ch), nil
	case errors.As(err, &refused) && refused.Code != provider.CodeIdempotencyKeyReused:
		return payments.ChargeResult{Succeeded: false, DeclineCode: declineCode(refused), Reference: req.Reference, Key: key}, nil
	default:
		return payments.ChargeResult{}, toPaymentsError("charge", err)
	}
}

// FindCharge returns the charge made under key. It returns errors wrapping
// payments.ErrProviderNoSuchCall, payments.ErrProviderNotExecuted or
// payments.ErrProviderUnknown.
func (p *PaymentsPort) FindCharge(ctx context.Context, key string) (payments.ChargeResult, error) {
	ch, err := p.client.GetChargeByKey(ctx, key)
	if err != nil {
		return payments.ChargeResult{}, toLookupError("find charge", err)
	}
	return toChargeResult(ch), nil
}

// Refund refunds under key. A failed refund (more than is left of the
// charge), and a refund the provider refused outright (an unknown or
// declined charge, an invalid request), come back with Succeeded false and a
// nil error. Errors as for Charge.
func (p *PaymentsPort) Refund(ctx context.Context, key string, req payments.RefundRequest) (payments.RefundResult, error) {
	rf, err := p.client.CreateRefund(provider.WithMerchant(ctx, req.MerchantID), key, provider.RefundRequest{
		Charge:    req.ChargeID,
		Amount:    req.Amount,
		Reference: req.Reference,
	})
	var refused *provider.APIError
	switch {
	case err == nil:
		return toRefundResult(rf), nil
	case errors.As(err, &refused) && refused.Code != provider.CodeIdempotencyKeyReused:
		return payments.RefundResult{Succeeded: false, Reference: req.Reference, Key: key}, nil
	default:
		return payments.RefundResult{}, toPaymentsError("refund", err)
	}
}

// FindRefund returns the refund made under key. Errors as for FindCharge.
func (p *PaymentsPort) FindRefund(ctx context.Context, key string) (payments.RefundResult, error) {
	rf, err := p.client.GetRefundByKey(ctx, key)
	if err != nil {
		return payments.RefundResult{}, toLookupError("find refund", err)
	}
	return toRefundResult(rf), nil
}

func toChargeResult(ch provider.Charge) payments.ChargeResult {
	return payments.ChargeResult{
		ChargeID:    ch.ID,
		Succeeded:   ch.Status == provider.ChargeSucceeded,
		DeclineCode: ch.DeclineCode,
		Reference:   ch.Reference,
		Key:         ch.IdempotencyKey,
		Amount:      ch.Amount,
		Currency:    ch.Currency,
	}
}

func toRefundResult(rf provider.Refund) payments.RefundResult {
	return payments.RefundResult{
		RefundID:  rf.ID,
		Succeeded: rf.Status == provider.RefundSucceeded,
		Reference: rf.Reference,
		Key:       rf.IdempotencyKey,
		Amount:    rf.Amount,
		Currency:  rf.Currency,
	}
}

// declineCode names a refused charge for the payment's decline_code. An
// unknown payment method is what a card processor calls an invalid payment
// method; any other refusal keeps the provider's own problem code (for
// example validation_failed), so the payment says exactly what the provider
// said.
func declineCode(refused *provider.APIError) string {
	for _, f := range refused.Errors {
		if f.Field == "payment_method" {
			return DeclineInvalidPaymentMethod
		}
	}
	return refused.Code
}

// toPaymentsError translates the error of a charge or refund.
//
// idempotency_key_reused is the one refusal that is not a failure: it says
// the provider already holds an operation under our key, made for a request
// that differs from this one. Our keys are derived from the payment or
// refund, so that points at a bug, but an operation does exist under the
// key, and calling it failed could contradict a charge that was made. It is
// reported as an unknown outcome instead: the service then settles it the
// way it settles every unknown, by looking the key up, and ends with what
// the provider actually did.
func toPaymentsError(op string, err error) error {
	var refused *provider.APIError
	switch {
	case errors.Is(err, provider.ErrNotExecuted):
		return fmt.Errorf("%s: %w: %w", op, payments.ErrProviderNotExecuted, err)
	case errors.Is(err, provider.ErrUnknownOutcome):
		return fmt.Errorf("%s: %w: %w", op, payments.ErrProviderUnknown, err)
	case errors.As(err, &refused) && refused.Code == provider.CodeIdempotencyKeyReused:
		return fmt.Errorf("%s: %w: the key holds another request: %w", op, payments.ErrProviderUnknown, err)
	default:
		// The client returns no other kind; keep the outcome unknown
		// rather than guess one.
		return fmt.Errorf("%s: %w: %w", op, payments.ErrProviderUnknown, err)
	}
}

// toLookupError translates the error of a lookup by key. A lookup has no
// effect, so a refusal other than 404 is reported as not executed: the
// caller asks again later, and the payment stays unsettled in plain sight
// rather than being settled on a guess.
func toLookupError(op string, err error) error {
	switch {
	case errors.Is(err, provider.ErrNotFound):
		return fmt.Errorf("%s: %w: %w", op, payments.ErrProviderNoSuchCall, err)
	case errors.Is(err, provider.ErrUnknownOutcome):
		return fmt.Errorf("%s: %w: %w", op, payments.ErrProviderUnknown, err)
	default:
		return fmt.Errorf("%s: %w: %w", op, payments.ErrProviderNotExecuted, err)
	}
}
