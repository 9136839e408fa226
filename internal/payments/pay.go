package payments

import (
	"context"
	"errors"
	"fmt"
)

// Recovery points of payments and refunds: a step and the id of the
// payment or refund. The id lets a retry find what the earlier attempt
// made; the step says how far it got.
const (
	pointPaymentCreated  = "payment_created"
	pointPaymentUnknown  = "payment_unknown"
	pointPaymentFinished = "payment_finished"
	pointRefundCreated   = "refund_created"
	pointRefundUnknown   = "refund_unknown"
	pointRefundFinished  = "refund_finished"
)

// resumedID returns the payment or refund id of the operation's last
// recovery point, or "" for a fresh operation.
func resumedID(rec Recovery) string {
	_, id := rec.RecoveryPoint()
	return id
}

// errNoPayments guards a Service built without WithPayments.
var errNoPayments = errors.New("payments are not configured on this service")

// PayOrder charges the order's total with in.PaymentMethod. It runs in three
// phases, each a recovery point, so that a retry after any failure resumes
// where the last attempt stopped and never repeats a finished phase:
//
//  1. one transaction: lock the order, insert the payment (pending) with the
//     provider key derived from it, and record "payment_created";
//  2. the provider call, outside any transaction, under the payment's
//     provider key: repeating it is how a retry resumes safely;
//  3. one transaction: the outcome, the order's status and the recovery
//     point "payment_finished". (The idempotency layer stores the answer
//     right after; if that is lost, a retry re-reads the final payment and
//     gives the same answer.)
//
// It returns the payment (succeeded, or processing when the provider's
// outcome is unknown), or: *ValidationError; ErrNotFound; ErrOrderAlreadyPaid;
// ErrPaymentInProgress (another payment of the order is in flight);
// *DeclinedError (the payment failed); *CanceledError (the key's payment
// was canceled); *UnavailableError, wrapping ErrProviderUnavailable (nothing
// charged; the payment stays pending and the same key resumes it); the
// Recovery's error when the operation was taken over; database errors.
func (s *Service) PayOrder(ctx context.Context, merchantID, orderID, idempotencyKey string, in PayInput, rec Recovery) (Payment, error) {
	if s.pay == nil {
		return Payment{}, errNoPayments
	}
	if err := in.Validate(); err != nil {
		return Payment{}, err
	}
	// A client that hangs up must not cut the work short: an abandoned
	// provider call is exactly the unknown outcome this design avoids.
	ctx = context.WithoutCancel(ctx)

	var p Payment
	resumed := resumedID(rec) != ""
	if id := resumedID(rec); resumed {
		got, err := s.pay.GetPayment(ctx, merchantID, id)
		if err != nil {
			return Payment{}, fmt.Errorf("resume payment %s: %w", id, err)
		}
		p = got
	} else {
		created, err := s.createPayment(ctx, merchantID, orderID, idempotencyKey, in, rec)
		if err != nil {
			return Payment{}, err
		}
		p = created
		if err := s.phase(ctx, PhaseCreated); err != nil {
			return p, err
		}
	}
	s.tracer.Annotate(ctx, AttrPaymentID, p.ID)
	if resumed && !p.Status.Final() {
		// A retry resuming the payment: record the attempt (fenced, with
		// the recovery point), so the reconciler does not cancel what a
		// client is still trying, and learn whether it canceled first.
		touched, err := s.touchPayment(ctx, p, rec)
		if err != nil {
			return p, err
		}
		p = touched
	}
	if p.Status.Final() {
		// Finished before a crash, resolved meanwhile by a webhook or the
		// reconciler, or canceled by it: answer from the row.
		return p, paymentOutcome(p)
	}

	result, err := s.provider.Charge(ctx, p.ProviderKey, ChargeRequest{
		Amount: p.Amount, Currency: p.Currency, PaymentMethod: p.PaymentMethod, Reference: p.ID,
	})
	if hookErr := s.phase(ctx, PhaseCalled); hookErr != nil {
		return p, hookErr
	}
	switch {
	case errors.Is(err, ErrProviderNotExecuted):
		return p, &UnavailableError{PaymentID: p.ID, Err: err}
	case err != nil:
		// Unknown: it may have charged. Record that, and answer 202; the
		// reconciler, a webhook or a retry under the same key resolves it.
		return s.markPaymentUnknown(ctx, p, rec)
	}
	p, err = s.finishPayment(ctx, p, result, rec)
	if err != nil {
		return p, err
	}
	if err := s.phase(ctx, PhaseFinished); err != nil {
		return p, err
	}
	return p, paymentOutcome(p)
}

func (s *Service) createPayment(ctx context.Context, merchantID, orderID, key string, in PayInput, rec Recovery) (Payment, error) {
	var p Payment
	err := s.pay.InTx(ctx, func(ctx context.Context) error {
		o, err := s.pay.LockOrder(ctx, merchantID, orderID)
		if err != nil {
			return err
		}
		if o.Status == OrderPaid {
			return ErrOrderAlreadyPaid
		}
		// Not paid: a clash on payments_one_active_per_order below is a
		// payment still in flight, ErrPaymentInProgress.
		now := s.now()
		id, err := s.ids.newID(paymentIDPrefix, now)
		if err != nil {
			return err
		}
		p = Payment{
			ID: id, MerchantID: merchantID, OrderID: o.ID, Amount: o.AmountTotal, Currency: o.Currency,
			PaymentMethod: in.PaymentMethod, Status: StatusPending,
			// The provider key is the payment id: one payment, one charge,
			// however often we ask.
			ProviderKey:    id,
			IdempotencyKey: key, TraceParent: s.tracer.TraceParent(ctx), LastAttemptAt: now, CreatedAt: now, UpdatedAt: now,
		}
		if err := s.pay.CreatePayment(ctx, p); err != nil {
			return err
		}
		return rec.Checkpoint(ctx, pointPaymentCreated, p.ID)
	})
	if err != nil {
		return Payment{}, fmt.Errorf("pay order %s: %w", orderID, err)
	}
	return p, nil
}

// touchPayment records a retry's attempt on a payment it resumes: the
// attempt time, if the payment is still pending or processing, and the
// recovery point again, which fails (ErrFenced) if the request no longer
// owns the key, in one transaction. The reconciler's cancel re-checks the
// attempt time inside its own transaction, with the key's record taken over
// first, so of the two exactly one wins: the payment is either resumed (and
// not canceled for another PENDING_CANCEL_AFTER) or found canceled here.
func (s *Service) touchPayment(ctx context.Context, p Payment, rec Recovery) (Payment, error) {
	err := s.pay.InTx(ctx, func(ctx context.Context) error {
		step, id := rec.RecoveryPoint()
		if err := rec.Checkpoint(ctx, step, id); err != nil {
			return err
		}
		now := s.now()
		touched, err := s.pay.TouchPayment(ctx, p.MerchantID, p.ID, now)
		if err != nil {
			return err
		}
		if touched {
			p.LastAttemptAt = now
			return nil
		}
		p, err = s.pay.GetPayment(ctx, p.MerchantID, p.ID)
		return err
	})
	if err != nil {
		return p, fmt.Errorf("resume payment %s: %w", p.ID, err)
	}
	return p, nil
}

// markPaymentUnknown moves a pending payment to processing and records the
// recovery point. If news arrived first (a webhook), the payment is already
// final and is returned as it is.
func (s *Service) markPaymentUnknown(ctx context.Context, p Payment, rec Recovery) (Payment, error) {
	err := s.pay.InTx(ctx, func(ctx context.Context) error {
		next := p
		next.Status, next.UpdatedAt = StatusProcessing, s.now()
		moved, err := s.pay.MovePayment(ctx, next, next.Status.sources()...)
		if err != nil {
			return err
		}
		if moved {
			p = next
		} else if p, err = s.pay.GetPayment(ctx, p.MerchantID, p.ID); err != nil {
			return err
		}
		return rec.Checkpoint(ctx, pointPaymentUnknown, p.ID)
	})
	if err != nil {
		return p, fmt.Errorf("record unknown outcome of %s: %w", p.ID, err)
	}
	return p, paymentOutcome(p)
}

// finishPayment applies a definitive provider result in one transaction:
// the payment's final state, the order's, and (for a request) the recovery
// point. rec is nil when no request owns the operation (reconciler,
// webhook). It returns the payment as stored, which is the earlier final
// state if news arrived first.
func (s *Service) finishPayment(ctx context.Context, p Payment, r ChargeResult, rec Recovery) (Payment, error) {
	err := s.pay.InTx(ctx, func(ctx context.Context) error {
		var err error
		p, _, err = s.applyCharge(ctx, p, r)
		if err != nil {
			return err
		}
		if rec != nil {
			return rec.Checkpoint(ctx, pointPaymentFinished, p.ID)
		}
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("finish payment %s: %w", p.ID, err)
	}
	return p, nil
}

// applyCharge moves p to the result's final state, inside the caller's
// transaction, and marks the order paid on success. moved is false when p
// was already final (nothing moves backwards); p is then re-read.
func (s *Service) applyCharge(ctx context.Context, p Payment, r ChargeResult) (Payment, bool, error) {
	// Lock the order before the payment, in the same order as phase 1 does
	// (order, then the new payment): two transactions that take the same
	// locks in opposite orders deadlock on PostgreSQL.
	if _, err := s.pay.LockOrder(ctx, p.MerchantID, p.OrderID); err != nil {
		return p, false, err
	}
	next := p
	next.ProviderChargeID, next.UpdatedAt = r.ChargeID, s.now()
	if r.Succeeded {
		next.Status, next.DeclineCode = StatusSucceeded, ""
	} else {
		next.Status, next.DeclineCode = StatusFailed, r.DeclineCode
		if next.DeclineCode == "" {
			next.DeclineCode = "declined"
		}
	}
	moved, err := s.pay.MovePayment(ctx, next, next.Status.sources()...)
	if err != nil {
		return p, false, err
	}
	if !moved {
		current, err := s.pay.GetPayment(ctx, p.MerchantID, p.ID)
		return current, false, err
	}
	if next.Status == StatusSucceeded {
		if err := s.pay.MarkOrderPaid(ctx, p.MerchantID, p.OrderID, next.UpdatedAt); err != nil {
			return p, false, err
		}
	}
	eventType := EventPaymentSucceeded
	if next.Status == StatusFailed {
		eventType = EventPaymentFailed
	}
	err = s.emit(ctx, p.MerchantID, eventType, paymentEvent{
		ID: next.ID, OrderID: next.OrderID, Amount: next.Amount, Currency: next.Currency, Status: string(next.Status),
		ProviderChargeID: next.ProviderChargeID, DeclineCode: next.DeclineCode,
	}, next.UpdatedAt)
	if err != nil {
		return p, false, err
	}
	return next, true, nil
}

// paymentOutcome is the error that goes with a payment's state: a decline
// for a failed payment, nil otherwise.
func paymentOutcome(p Payment) error {
	switch p.Status {
	case StatusFailed:
		return &DeclinedError{PaymentID: p.ID, DeclineCode: p.DeclineCode}
	case StatusCanceled:
		return &CanceledError{PaymentID: p.ID}
	}
	return nil
}

// GetPayment returns the merchant's payment. It returns ErrNotFound.
func (s *Service) GetPayment(ctx context.Context, merchantID, id string) (Payment, error) {
	if s.pay == nil {
		return Payment{}, errNoPayments
	}
	p, err := s.pay.GetPayment(ctx, merchantID, id)
	if err != nil {
		return Payment{}, fmt.Errorf("get payment %s: %w", id, err)
	}
	return p, nil
}

func (s *Service) phase(ctx context.Context, name string) error {
	if s.hook == nil {
		return nil
	}
	return s.hook(ctx, name)
}
