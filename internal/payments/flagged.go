package payments

import (
	"context"
	"fmt"
	"strings"
)

// DeclineChargeMismatch is the decline code of a payment an operator failed
// because the provider's charge under its key was not the one we asked for
// (FailFlagged).
const DeclineChargeMismatch = "charge_mismatch"

// FailFlagged is api flagged fail: the way out of a flagged payment or
// refund whose provider answer is wrong (a charge of 1 under our key for a
// payment of 2,500). The operator rules that it failed: the payment (or
// refund) ends failed, with its event, and its key's answer is stored
// (402 payment_declined with decline code charge_mismatch; a failed refund
// is 201 failed). What the provider holds under the key is then an effect
// nobody asked for: a charge is refunded automatically under a key derived
// from it, through the same fenced skeleton as an orphan's, and a refund
// flagged as an orphan. The order can be paid again with a new key.
//
// It returns ErrNotFound, an error when the call is not flagged, the
// provider's errors (it is asked what it holds first), and the store's.
func (s *Service) FailFlagged(ctx context.Context, merchantID, id string) error {
	return s.overrule(ctx, merchantID, id, true)
}

// AcceptFlagged is api flagged accept: the provider's answer for a flagged
// payment or refund is applied as it is, without the money check (the
// operator vouches for it), and its key's answer stored. It returns what
// FailFlagged returns.
func (s *Service) AcceptFlagged(ctx context.Context, merchantID, id string) error {
	return s.overrule(ctx, merchantID, id, false)
}

// RetryFlagged is api flagged retry: a flagged payment or refund goes back
// to the reconciler, whose next round asks the provider again and checks
// its answer anew, once the operator has corrected what differed. It
// returns ErrNotFound, an error when the call is not flagged, and the
// store's.
func (s *Service) RetryFlagged(ctx context.Context, merchantID, id string) error {
	switch {
	case s.charges == nil:
		return errNoPayments
	case strings.HasPrefix(id, paymentIDPrefix):
		_, err := s.charges.Rule(ctx, merchantID, id, nil)
		return err
	case strings.HasPrefix(id, refundIDPrefix):
		_, err := s.refunds.Rule(ctx, merchantID, id, nil)
		return err
	}
	return notFlaggable(id)
}

// overrule ends the flagged payment or refund id with the provider's
// answer (accept), or with a failure (fail), once the provider has said
// what it holds under the call's key.
func (s *Service) overrule(ctx context.Context, merchantID, id string, fail bool) error {
	if s.charges == nil {
		return errNoPayments
	}
	switch {
	case strings.HasPrefix(id, paymentIDPrefix):
		p, err := s.pay.GetPayment(ctx, merchantID, id)
		if err != nil {
			return err
		}
		held, err := s.provider.FindCharge(ctx, p.ProviderKey)
		if err != nil {
			return fmt.Errorf("ask the provider about payment %s: %w", id, err)
		}
		ruling := held
		if fail {
			ruling = ChargeResult{ChargeID: held.ChargeID, DeclineCode: DeclineChargeMismatch, Reference: p.ID, Key: p.ProviderKey}
		}
		if _, err = s.charges.Rule(ctx, merchantID, id, &ruling); err != nil {
			return err
		}
		_, _, err = s.charges.Apply(ctx, merchantID, id, held)
		return err
	case strings.HasPrefix(id, refundIDPrefix):
		r, err := s.pay.GetRefund(ctx, merchantID, id)
		if err != nil {
			return err
		}
		held, err := s.provider.FindRefund(ctx, r.ProviderKey)
		if err != nil {
			return fmt.Errorf("ask the provider about refund %s: %w", id, err)
		}
		ruling := held
		if fail {
			ruling = RefundResult{RefundID: held.RefundID, Reference: r.ID, Key: r.ProviderKey}
		}
		if _, err = s.refunds.Rule(ctx, merchantID, id, &ruling); err != nil {
			return err
		}
		_, _, err = s.refunds.Apply(ctx, merchantID, id, held)
		return err
	}
	return notFlaggable(id)
}

func notFlaggable(id string) error {
	return fmt.Errorf("%s is neither a payment (pay_…) nor a refund (re_…): %w", id, ErrNotFound)
}
