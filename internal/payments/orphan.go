package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

// An orphan is an effect nobody asked for: a succeeded charge the provider
// holds for a payment we consider canceled or failed, or a succeeded refund
// for a refund we consider so. Fencing every provider call (the intent,
// docs/design/operation.md) keeps our own instances from making one; what is
// left is a call sent without an intent (an instance of a version before
// fencing, a hand at the provider's dashboard) and a provider that changes
// its mind. Whoever learns of one (a webhook, the reconciler's late look at
// a call it canceled, a request's own late answer) hands it to Orphan, under
// the call's row lock:
//
//   - an orphan charge is refunded automatically, through the same fenced
//     skeleton: the refund is an outside call the system starts itself
//     (idempotency.Effect.Start), whose id and provider key are derived from
//     the charge's id, so two reconcilers and a webhook refund it once;
//   - an orphan refund cannot be undone by us: it is flagged for an
//     operator (api flagged).
//
// Each is one row of orphans, one log line at error with the ids, and the
// orphan count (payments_reconciliations_total{result="orphan"}, alerted).

// Orphan is one effect nobody asked for, and what became of it.
type Orphan struct {
	// ID is the automatic refund's id (orf_…, derived from the charge's
	// id) for a charge; for a refund, an id of its own.
	ID         string
	MerchantID string
	// Kind is "charge" or "refund"; ResourceID our payment or refund, and
	// ProviderID the provider's charge or refund.
	Kind       string
	ResourceID string
	ProviderID string
	// Amount and Currency are what the provider holds.
	Amount   int64
	Currency string
	Status   OrphanStatus
	// ProviderKey is the automatic refund's key; ProviderRefundID the
	// refund the provider made under it.
	ProviderKey      string
	ProviderRefundID string
	// Note says why an operator must look.
	Note      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// OrphanStatus is where an orphan stands.
type OrphanStatus string

// The states of an orphan.
const (
	// OrphanRefunding: an orphan charge whose automatic refund is on its
	// way (the reconciler sends it at its next round).
	OrphanRefunding OrphanStatus = "refunding"
	// OrphanRefunded: the provider refunded the orphan charge.
	OrphanRefunded OrphanStatus = "refunded"
	// OrphanFlagged: an operator must act (an orphan refund, or a charge
	// whose automatic refund the provider refused); Note says why.
	OrphanFlagged OrphanStatus = "flagged"
	// OrphanResolved: an operator handled it by hand (api flagged resolve).
	OrphanResolved OrphanStatus = "resolved"
)

// orphanIDPrefix starts the ids of orphans.
const orphanIDPrefix = "orf_"

// ErrOrphanNotFlagged: api flagged resolve named an orphan that is not
// flagged (refunding, refunded, or resolved already).
var ErrOrphanNotFlagged = errors.New("the orphan is not flagged")

// chargeOrphan is the charges' Orphan: a succeeded charge for a payment
// that ended canceled or failed is refunded automatically.
func (s *Service) chargeOrphan(ctx context.Context, p Payment, res ChargeResult) (bool, error) {
	if !res.Succeeded || (p.Status != StatusCanceled && p.Status != StatusFailed) {
		return false, nil
	}
	o, started, err := s.orphanRefunds.Start(ctx, p.MerchantID, res.ChargeID, func(ctx context.Context, c idempotency.Call) (Orphan, error) {
		now := s.now()
		o := Orphan{
			ID: c.ID, MerchantID: p.MerchantID, Kind: "charge", ResourceID: p.ID, ProviderID: res.ChargeID,
			Amount: res.Amount, Currency: res.Currency, Status: OrphanRefunding, ProviderKey: c.Key,
			CreatedAt: now, UpdatedAt: now,
		}
		_, err := s.pay.CreateOrphan(ctx, o)
		return o, err
	})
	if err != nil {
		return false, fmt.Errorf("refund orphan charge %s of payment %s: %w", res.ChargeID, p.ID, err)
	}
	if !started {
		return false, nil // found again (a webhook redelivered, another look): refunded once
	}
	s.log.ErrorContext(ctx, "orphan charge: the provider holds a succeeded charge for a payment that ended without one; refunding it",
		"merchant_id", p.MerchantID, "payment_id", p.ID, "payment_status", p.Status, "provider_charge_id", res.ChargeID,
		"amount", res.Amount, "currency", res.Currency, "orphan_id", o.ID)
	return true, nil
}

// refundOrphan is the refunds' Orphan: a succeeded refund for a refund
// that ended canceled or failed is flagged.
func (s *Service) refundOrphan(ctx context.Context, r Refund, res RefundResult) (bool, error) {
	if !res.Succeeded || (r.Status != StatusCanceled && r.Status != StatusFailed) {
		return false, nil
	}
	now := s.now()
	id, err := s.ids.newID(orphanIDPrefix, now)
	if err != nil {
		return false, err
	}
	o := Orphan{
		ID: id, MerchantID: r.MerchantID, Kind: "refund", ResourceID: r.ID, ProviderID: res.RefundID,
		Amount: res.Amount, Currency: res.Currency, Status: OrphanFlagged,
		Note:      fmt.Sprintf("the provider refunded %d %s under refund %s, which ended %s; a refund cannot be undone automatically", res.Amount, res.Currency, r.ID, r.Status),
		CreatedAt: now, UpdatedAt: now,
	}
	created, err := s.pay.CreateOrphan(ctx, o)
	if err != nil {
		return false, fmt.Errorf("flag orphan refund %s of refund %s: %w", res.RefundID, r.ID, err)
	}
	if !created {
		return false, nil // found again: flagged once
	}
	s.log.ErrorContext(ctx, "orphan refund: the provider holds a succeeded refund for a refund that ended without one; flagged for an operator",
		"merchant_id", r.MerchantID, "refund_id", r.ID, "refund_status", r.Status, "provider_refund_id", res.RefundID,
		"amount", res.Amount, "currency", res.Currency, "orphan_id", o.ID)
	return true, nil
}

// orphanRefundEffect refunds an orphan charge: an outside call the system
// starts (chargeOrphan), sent and settled by the reconciler like any other.
// Nobody waits for its answer, and it is never canceled: a call started
// unknown is sent until the provider executes it.
func (s *Service) orphanRefundEffect() idempotency.Effect[Orphan, RefundResult] {
	return idempotency.Effect[Orphan, RefundResult]{
		Kind:   "orphan_refund",
		Prefix: orphanIDPrefix,
		Load:   s.pay.GetOrphan,
		Send: func(ctx context.Context, o Orphan, key string) (RefundResult, error) {
			return s.provider.Refund(ctx, key, RefundRequest{ChargeID: o.ProviderID, Amount: o.Amount, Reference: o.ID, MerchantID: o.MerchantID})
		},
		Find: func(ctx context.Context, _ Orphan, key string) (RefundResult, error) {
			return s.provider.FindRefund(ctx, key)
		},
		Check: func(o Orphan, res RefundResult) error {
			return checkRefund(Refund{ID: o.ID, ProviderKey: o.ProviderKey, Amount: o.Amount, Currency: o.Currency}, res)
		},
		Settle: func(ctx context.Context, o Orphan, res RefundResult) (Orphan, error) {
			next := o
			next.ProviderRefundID, next.Status, next.UpdatedAt = res.RefundID, OrphanRefunded, s.now()
			if !res.Succeeded {
				next.Status = OrphanFlagged
				next.Note = fmt.Sprintf("the provider refused the automatic refund of charge %s (%d %s)", o.ProviderID, o.Amount, o.Currency)
				s.log.ErrorContext(ctx, "orphan charge: the provider refused its automatic refund; flagged for an operator",
					"merchant_id", o.MerchantID, "orphan_id", o.ID, "provider_charge_id", o.ProviderID)
			}
			return next, s.pay.SaveOrphan(ctx, next)
		},
		Answer: func(Orphan) idempotency.Answer {
			// No client asked: the core stores no answer for a call
			// without a client key.
			return idempotency.Answer{}
		},
	}
}

// ResolveOrphan marks a flagged orphan as handled by hand (api flagged
// resolve): it leaves the list an operator works through. It returns
// ErrNotFound, or ErrOrphanNotFlagged.
func (s *Service) ResolveOrphan(ctx context.Context, merchantID, id string) error {
	return s.pay.InTx(ctx, func(ctx context.Context) error {
		o, err := s.pay.GetOrphan(ctx, merchantID, id)
		if err != nil {
			return err
		}
		if o.Status != OrphanFlagged {
			return fmt.Errorf("orphan %s is %s: %w", id, o.Status, ErrOrphanNotFlagged)
		}
		o.Status, o.UpdatedAt = OrphanResolved, s.now()
		return s.pay.SaveOrphan(ctx, o)
	})
}
