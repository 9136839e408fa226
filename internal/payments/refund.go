package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkeys/payments/internal/idempotency"
)

// RefundPayment refunds in.Amount (all that is left when nil) of a
// succeeded payment, on the same skeleton as PayOrder: reserve the refund
// under the payment's row lock, record the intent, call the provider under
// the refund's own key, apply the outcome with the payment's refunded
// amount.
//
// It returns the refund (succeeded, failed or canceled, each a result and
// not an error; or processing when the outcome is unknown), or:
// *ValidationError; ErrNotFound; ErrRefundExceedsPayment;
// ErrPaymentInProgress (the payment is not settled yet); *UnavailableError
// (wrapping ErrProviderUnavailable); idempotency.ErrFenced; database
// errors.
func (s *Service) RefundPayment(ctx context.Context, op *idempotency.Op, merchantID, paymentID string, in RefundInput) (Refund, error) {
	if s.refunds == nil {
		return Refund{}, errNoPayments
	}
	if err := in.Validate(); err != nil {
		return Refund{}, err
	}
	r, err := s.refunds.Run(ctx, op, func(ctx context.Context, c idempotency.Call) (Refund, error) {
		return s.createRefund(ctx, merchantID, paymentID, in, c)
	})
	if r.ID != "" {
		s.tracer.Annotate(ctx, AttrRefundID, r.ID)
	}
	switch {
	case errors.Is(err, idempotency.ErrNotExecuted):
		return r, &UnavailableError{RefundID: r.ID, Err: err}
	case err != nil:
		return r, fmt.Errorf("refund payment %s: %w", paymentID, err)
	}
	return r, nil
}

// createRefund reserves the amount under the payment's row lock: the sum of
// refunds not failed (done or on their way) plus this one never exceeds the
// payment, however many refunds race.
func (s *Service) createRefund(ctx context.Context, merchantID, paymentID string, in RefundInput, c idempotency.Call) (Refund, error) {
	p, err := s.pay.LockPayment(ctx, merchantID, paymentID)
	if err != nil {
		return Refund{}, err
	}
	switch p.Status {
	case StatusSucceeded:
	case StatusPending, StatusProcessing:
		// It may yet succeed: a conflict that clears.
		return Refund{}, fmt.Errorf("%w: the payment is %s", ErrPaymentInProgress, p.Status)
	default:
		return Refund{}, fmt.Errorf("%w: the payment is %s", ErrRefundExceedsPayment, p.Status)
	}
	reserved, err := s.pay.ReservedRefunds(ctx, merchantID, paymentID)
	if err != nil {
		return Refund{}, err
	}
	left := p.Amount - reserved
	amount := left
	if in.Amount != nil {
		amount = *in.Amount
	}
	if amount <= 0 || amount > left {
		return Refund{}, fmt.Errorf("%w: %d asked, %d left", ErrRefundExceedsPayment, amount, left)
	}
	now := s.now()
	r := Refund{
		ID: c.ID, MerchantID: merchantID, PaymentID: paymentID, Amount: amount, Currency: p.Currency,
		Status: StatusPending, ProviderKey: c.Key, IdempotencyKey: c.ClientKey, TraceParent: s.tracer.TraceParent(ctx),
		LastAttemptAt: now, CreatedAt: now, UpdatedAt: now,
	}
	if err := s.pay.CreateRefund(ctx, r); err != nil {
		return Refund{}, err
	}
	return r, nil
}

// refundEffect is what each phase of a refund does to the refund (see
// chargeEffect).
func (s *Service) refundEffect(answer func(Refund) idempotency.Answer) idempotency.Effect[Refund, RefundResult] {
	return idempotency.Effect[Refund, RefundResult]{
		Kind:   "refund",
		Prefix: refundIDPrefix,
		Load:   s.pay.GetRefund,
		Send: func(ctx context.Context, r Refund, key string) (RefundResult, error) {
			p, err := s.pay.GetPayment(ctx, r.MerchantID, r.PaymentID)
			if err != nil {
				// Nothing was sent: the refund is as ready as before.
				return RefundResult{}, fmt.Errorf("%w: read payment %s: %w", idempotency.ErrNotExecuted, r.PaymentID, err)
			}
			return s.provider.Refund(ctx, key, RefundRequest{ChargeID: p.ProviderChargeID, Amount: r.Amount, Reference: r.ID, MerchantID: r.MerchantID})
		},
		Find: func(ctx context.Context, _ Refund, key string) (RefundResult, error) {
			return s.provider.FindRefund(ctx, key)
		},
		Check: checkRefund,
		Settle: func(ctx context.Context, r Refund, res RefundResult) (Refund, error) {
			r, _, err := s.applyRefund(ctx, r, res)
			return r, err
		},
		Unknown: func(ctx context.Context, r Refund) (Refund, error) {
			return s.moveRefund(ctx, r, StatusProcessing, nil)
		},
		Cancel: func(ctx context.Context, r Refund) (Refund, error) {
			// A canceled refund is not counted: what it reserved of the
			// payment is free again.
			return s.moveRefund(ctx, r, StatusCanceled, func(next Refund) error { return s.emitRefund(ctx, next) })
		},
		Answer: answer,
		Orphan: s.refundOrphan,
	}
}

// checkRefund is checkCharge for a refund.
func checkRefund(r Refund, res RefundResult) error {
	switch {
	case res.Key != "" && res.Key != r.ProviderKey:
		return fmt.Errorf("%w: refund %s is under key %q, refund %s under %q", idempotency.ErrMismatch, res.RefundID, res.Key, r.ID, r.ProviderKey)
	case res.Reference != "" && res.Reference != r.ID:
		return fmt.Errorf("%w: provider refund %s names %s, not refund %s", idempotency.ErrMismatch, res.RefundID, res.Reference, r.ID)
	case !res.Succeeded && res.Amount == 0 && res.Currency == "":
		return nil
	case res.Amount != r.Amount || res.Currency != r.Currency:
		return fmt.Errorf("%w: provider refund %s is %d %s, refund %s is %d %s", idempotency.ErrMismatch,
			res.RefundID, res.Amount, res.Currency, r.ID, r.Amount, r.Currency)
	}
	return nil
}

// moveRefund is movePayment for a refund.
func (s *Service) moveRefund(ctx context.Context, r Refund, status Status, also func(next Refund) error) (Refund, error) {
	next := r
	next.Status, next.UpdatedAt = status, s.now()
	moved, err := s.pay.MoveRefund(ctx, next, status.sources()...)
	if err != nil {
		return r, err
	}
	if !moved {
		return s.pay.GetRefund(ctx, r.MerchantID, r.ID)
	}
	if also != nil {
		if err := also(next); err != nil {
			return r, err
		}
	}
	return next, nil
}

// applyRefund moves r to the result's final state inside the caller's
// transaction and, on success, adds it to the payment's refunded amount.
func (s *Service) applyRefund(ctx context.Context, r Refund, res RefundResult) (Refund, bool, error) {
	next := r
	next.ProviderRefundID, next.UpdatedAt = res.RefundID, s.now()
	next.Status = StatusFailed
	if res.Succeeded {
		next.Status = StatusSucceeded
	}
	moved, err := s.pay.MoveRefund(ctx, next, next.Status.sources()...)
	if err != nil {
		return r, false, err
	}
	if !moved {
		current, err := s.pay.GetRefund(ctx, r.MerchantID, r.ID)
		return current, false, err
	}
	if next.Status == StatusSucceeded {
		if err := s.pay.AddRefunded(ctx, r.MerchantID, r.PaymentID, r.Amount, next.UpdatedAt); err != nil {
			return r, false, err
		}
		if err := s.emitRefund(ctx, next); err != nil {
			return r, false, err
		}
	}
	return next, true, nil
}

// GetRefund returns the merchant's refund. It returns ErrNotFound.
func (s *Service) GetRefund(ctx context.Context, merchantID, id string) (Refund, error) {
	if s.pay == nil {
		return Refund{}, errNoPayments
	}
	r, err := s.pay.GetRefund(ctx, merchantID, id)
	if err != nil {
		return Refund{}, fmt.Errorf("get refund %s: %w", id, err)
	}
	return r, nil
}
