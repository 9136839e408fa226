package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkeys/payments/internal/idempotency"
)

// errNoPayments guards a Service built without WithPayments and
// WithOutsideCalls.
var errNoPayments = errors.New("payments are not configured on this service")

// PayOrder charges the order's total with in.PaymentMethod, as op, the
// operation that owns the request's idempotency record (a Guarded route's). The core's skeleton
// for outside calls runs it (idempotency.Effect.Run), in phases that a
// retry, or a request taking over a crashed one, resumes where the last
// attempt stopped:
//
//  1. one transaction: lock the order, insert the payment (pending), whose
//     id and provider key the core derived from the client's key;
//  2. one transaction: the intent to charge, under the record's fence;
//  3. the charge, under the provider key, which the provider honours: a
//     charge made before a crash is found, not made again;
//  4. one transaction: the provider's answer checked against the payment
//     and applied (the payment, the order, the outbox event) with the
//     client's answer stored; or the outcome recorded as unknown.
//
// It returns the payment: succeeded, failed (declined) or canceled (the
// key's payment never reached the provider), each a result and not an
// error; or processing, when the provider's outcome is unknown. Or it
// returns: *ValidationError; ErrNotFound; ErrOrderAlreadyPaid;
// ErrPaymentInProgress (another payment of the order is in flight);
// *UnavailableError, wrapping
// ErrProviderUnavailable (nothing charged; the same key resumes it);
// idempotency.ErrFenced when the operation was taken over; database errors.
func (s *Service) PayOrder(ctx context.Context, op *idempotency.Op, merchantID, orderID string, in PayInput) (Payment, error) {
	if s.charges == nil {
		return Payment{}, errNoPayments
	}
	if err := in.Validate(); err != nil {
		return Payment{}, err
	}
	p, err := s.charges.Run(ctx, op, func(ctx context.Context, c idempotency.Call) (Payment, error) {
		return s.createPayment(ctx, merchantID, orderID, in, c)
	})
	if p.ID != "" {
		s.tracer.Annotate(ctx, AttrPaymentID, p.ID)
	}
	switch {
	case errors.Is(err, idempotency.ErrNotExecuted):
		return p, &UnavailableError{PaymentID: p.ID, Err: err}
	case err != nil:
		return p, fmt.Errorf("pay order %s: %w", orderID, err)
	}
	return p, nil
}

// createPayment is phase 1 of a new payment, in the skeleton's transaction:
// the order locked and still payable, the payment inserted pending under
// the call's id and key.
func (s *Service) createPayment(ctx context.Context, merchantID, orderID string, in PayInput, c idempotency.Call) (Payment, error) {
	o, err := s.pay.LockOrder(ctx, merchantID, orderID)
	if err != nil {
		return Payment{}, err
	}
	if o.Status == OrderPaid {
		return Payment{}, ErrOrderAlreadyPaid
	}
	// Not paid: a clash on payments_one_active_per_order below is a
	// payment still in flight, ErrPaymentInProgress.
	now := s.now()
	p := Payment{
		ID: c.ID, MerchantID: merchantID, OrderID: o.ID, Amount: o.AmountTotal, Currency: o.Currency,
		PaymentMethod: in.PaymentMethod, Status: StatusPending,
		// One payment, one charge, however often we ask: the provider key
		// is the call's, derived from the client's operation.
		ProviderKey:    c.Key,
		IdempotencyKey: c.ClientKey, TraceParent: s.tracer.TraceParent(ctx), LastAttemptAt: now, CreatedAt: now, UpdatedAt: now,
	}
	if err := s.pay.CreatePayment(ctx, p); err != nil {
		return Payment{}, err
	}
	return p, nil
}

// chargeEffect is what each phase of a payment does to the payment: the
// idempotency.Effect the core runs payments with, settles them later with,
// and stores their answers by (answer).
func (s *Service) chargeEffect(answer func(Payment) idempotency.Answer) idempotency.Effect[Payment, ChargeResult] {
	return idempotency.Effect[Payment, ChargeResult]{
		Kind:   "payment",
		Prefix: paymentIDPrefix,
		Load:   s.pay.GetPayment,
		Send: func(ctx context.Context, p Payment, key string) (ChargeResult, error) {
			return s.provider.Charge(ctx, key, ChargeRequest{
				Amount: p.Amount, Currency: p.Currency, PaymentMethod: p.PaymentMethod, Reference: p.ID, MerchantID: p.MerchantID,
			})
		},
		Find: func(ctx context.Context, _ Payment, key string) (ChargeResult, error) {
			return s.provider.FindCharge(ctx, key)
		},
		Check: checkCharge,
		Settle: func(ctx context.Context, p Payment, r ChargeResult) (Payment, error) {
			p, _, err := s.applyCharge(ctx, p, r)
			return p, err
		},
		Unknown: func(ctx context.Context, p Payment) (Payment, error) {
			return s.movePayment(ctx, p, StatusProcessing, nil)
		},
		Cancel: func(ctx context.Context, p Payment) (Payment, error) {
			return s.movePayment(ctx, p, StatusCanceled, func(next Payment) error { return s.emitPayment(ctx, next) })
		},
		Answer: answer,
		Orphan: s.chargeOrphan,
	}
}

// checkCharge holds the provider's answer to our payment: the money check
// of every path that applies a charge (the request, the reconciler, a
// webhook). A refusal that charged nothing (no amount, no currency) has no
// money to check.
func checkCharge(p Payment, r ChargeResult) error {
	switch {
	case r.Key != "" && r.Key != p.ProviderKey:
		return fmt.Errorf("%w: charge %s is under key %q, payment %s under %q", idempotency.ErrMismatch, r.ChargeID, r.Key, p.ID, p.ProviderKey)
	case r.Reference != "" && r.Reference != p.ID:
		return fmt.Errorf("%w: charge %s names %s, not payment %s", idempotency.ErrMismatch, r.ChargeID, r.Reference, p.ID)
	case !r.Succeeded && r.Amount == 0 && r.Currency == "":
		return nil
	case r.Amount != p.Amount || r.Currency != p.Currency:
		return fmt.Errorf("%w: charge %s is %d %s, payment %s is %d %s", idempotency.ErrMismatch,
			r.ChargeID, r.Amount, r.Currency, p.ID, p.Amount, p.Currency)
	}
	return nil
}

// movePayment moves p to status in the caller's transaction, if it has not
// moved on meanwhile (then it is returned as it stands), and runs also with
// the moved payment.
func (s *Service) movePayment(ctx context.Context, p Payment, status Status, also func(next Payment) error) (Payment, error) {
	next := p
	next.Status, next.UpdatedAt = status, s.now()
	moved, err := s.pay.MovePayment(ctx, next, status.sources()...)
	if err != nil {
		return p, err
	}
	if !moved {
		return s.pay.GetPayment(ctx, p.MerchantID, p.ID)
	}
	if also != nil {
		if err := also(next); err != nil {
			return p, err
		}
	}
	return next, nil
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
	if err := s.emitPayment(ctx, next); err != nil {
		return p, false, err
	}
	return next, true, nil
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
