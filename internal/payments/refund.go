package payments

import (
	"context"
	"errors"
	"fmt"
)

// RefundPayment refunds in.Amount (all that is left when nil) of a
// succeeded payment, in the same three phases as PayOrder: reserve the
// refund under the payment's row lock, call the provider under the refund's
// own provider key, record the outcome with the payment's refunded amount.
//
// It returns the refund (succeeded, failed, or processing when the outcome
// is unknown), or: *ValidationError; ErrNotFound; ErrRefundExceedsPayment;
// ErrPaymentInProgress (the payment is not settled yet); *CanceledError;
// *UnavailableError (wrapping ErrProviderUnavailable); the Recovery's
// error; database errors.
func (s *Service) RefundPayment(ctx context.Context, merchantID, paymentID, idempotencyKey string, in RefundInput, rec Recovery) (Refund, error) {
	if s.pay == nil {
		return Refund{}, errNoPayments
	}
	if err := in.Validate(); err != nil {
		return Refund{}, err
	}
	ctx = context.WithoutCancel(ctx)

	var r Refund
	resumed := resumedID(rec) != ""
	if id := resumedID(rec); resumed {
		got, err := s.pay.GetRefund(ctx, merchantID, id)
		if err != nil {
			return Refund{}, fmt.Errorf("resume refund %s: %w", id, err)
		}
		r = got
	} else {
		created, err := s.createRefund(ctx, merchantID, paymentID, idempotencyKey, in, rec)
		if err != nil {
			return Refund{}, err
		}
		r = created
		if err := s.phase(ctx, PhaseCreated); err != nil {
			return r, err
		}
	}
	s.tracer.Annotate(ctx, AttrRefundID, r.ID)
	if resumed && !r.Status.Final() {
		// As for a payment (touchPayment): the attempt is recorded, fenced.
		touched, err := s.touchRefund(ctx, r, rec)
		if err != nil {
			return r, err
		}
		r = touched
	}
	if r.Status.Final() {
		return r, refundOutcome(r)
	}
	p, err := s.pay.GetPayment(ctx, merchantID, r.PaymentID)
	if err != nil {
		return r, fmt.Errorf("refund %s: %w", r.ID, err)
	}

	result, err := s.provider.Refund(ctx, r.ProviderKey, RefundRequest{ChargeID: p.ProviderChargeID, Amount: r.Amount, Reference: r.ID})
	if hookErr := s.phase(ctx, PhaseCalled); hookErr != nil {
		return r, hookErr
	}
	switch {
	case errors.Is(err, ErrProviderNotExecuted):
		return r, &UnavailableError{RefundID: r.ID, Err: err}
	case err != nil:
		return s.markRefundUnknown(ctx, r, rec)
	}
	r, err = s.finishRefund(ctx, r, result, rec)
	if err != nil {
		return r, err
	}
	if err := s.phase(ctx, PhaseFinished); err != nil {
		return r, err
	}
	return r, nil
}

// createRefund reserves the amount under the payment's row lock: the sum of
// refunds not failed (done or on their way) plus this one never exceeds the
// payment, however many refunds race.
func (s *Service) createRefund(ctx context.Context, merchantID, paymentID, key string, in RefundInput, rec Recovery) (Refund, error) {
	var r Refund
	err := s.pay.InTx(ctx, func(ctx context.Context) error {
		p, err := s.pay.LockPayment(ctx, merchantID, paymentID)
		if err != nil {
			return err
		}
		switch p.Status {
		case StatusSucceeded:
		case StatusPending, StatusProcessing:
			// It may yet succeed: a conflict that clears.
			return fmt.Errorf("%w: the payment is %s", ErrPaymentInProgress, p.Status)
		default:
			return fmt.Errorf("%w: the payment is %s", ErrRefundExceedsPayment, p.Status)
		}
		reserved, err := s.pay.ReservedRefunds(ctx, merchantID, paymentID)
		if err != nil {
			return err
		}
		left := p.Amount - reserved
		amount := left
		if in.Amount != nil {
			amount = *in.Amount
		}
		if amount <= 0 || amount > left {
			return fmt.Errorf("%w: %d asked, %d left", ErrRefundExceedsPayment, amount, left)
		}
		now := s.now()
		id, err := s.ids.newID(refundIDPrefix, now)
		if err != nil {
			return err
		}
		r = Refund{
			ID: id, MerchantID: merchantID, PaymentID: paymentID, Amount: amount, Currency: p.Currency,
			Status: StatusPending, ProviderKey: id, IdempotencyKey: key, TraceParent: s.tracer.TraceParent(ctx),
			LastAttemptAt: now, CreatedAt: now, UpdatedAt: now,
		}
		if err := s.pay.CreateRefund(ctx, r); err != nil {
			return err
		}
		return rec.Checkpoint(ctx, pointRefundCreated, r.ID)
	})
	if err != nil {
		return Refund{}, fmt.Errorf("refund payment %s: %w", paymentID, err)
	}
	return r, nil
}

// touchRefund is touchPayment for a refund.
func (s *Service) touchRefund(ctx context.Context, r Refund, rec Recovery) (Refund, error) {
	err := s.pay.InTx(ctx, func(ctx context.Context) error {
		step, id := rec.RecoveryPoint()
		if err := rec.Checkpoint(ctx, step, id); err != nil {
			return err
		}
		now := s.now()
		touched, err := s.pay.TouchRefund(ctx, r.MerchantID, r.ID, now)
		if err != nil {
			return err
		}
		if touched {
			r.LastAttemptAt = now
			return nil
		}
		r, err = s.pay.GetRefund(ctx, r.MerchantID, r.ID)
		return err
	})
	if err != nil {
		return r, fmt.Errorf("resume refund %s: %w", r.ID, err)
	}
	return r, nil
}

// refundOutcome is the error that goes with a final refund: a cancel is
// one (the key answers 409 refund_canceled), a failed refund is not (201).
func refundOutcome(r Refund) error {
	if r.Status == StatusCanceled {
		return &CanceledError{RefundID: r.ID}
	}
	return nil
}

func (s *Service) markRefundUnknown(ctx context.Context, r Refund, rec Recovery) (Refund, error) {
	err := s.pay.InTx(ctx, func(ctx context.Context) error {
		next := r
		next.Status, next.UpdatedAt = StatusProcessing, s.now()
		moved, err := s.pay.MoveRefund(ctx, next, next.Status.sources()...)
		if err != nil {
			return err
		}
		if moved {
			r = next
		} else if r, err = s.pay.GetRefund(ctx, r.MerchantID, r.ID); err != nil {
			return err
		}
		return rec.Checkpoint(ctx, pointRefundUnknown, r.ID)
	})
	if err != nil {
		return r, fmt.Errorf("record unknown outcome of %s: %w", r.ID, err)
	}
	return r, nil
}

func (s *Service) finishRefund(ctx context.Context, r Refund, res RefundResult, rec Recovery) (Refund, error) {
	err := s.pay.InTx(ctx, func(ctx context.Context) error {
		var err error
		r, _, err = s.applyRefund(ctx, r, res)
		if err != nil {
			return err
		}
		if rec != nil {
			return rec.Checkpoint(ctx, pointRefundFinished, r.ID)
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("finish refund %s: %w", r.ID, err)
	}
	return r, nil
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
		err = s.emit(ctx, r.MerchantID, EventRefundSucceeded, refundEvent{
			ID: next.ID, PaymentID: next.PaymentID, Amount: next.Amount, Currency: next.Currency, Status: string(next.Status),
		}, next.UpdatedAt)
		if err != nil {
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
