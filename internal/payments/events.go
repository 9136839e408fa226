package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// ProviderEvent is a provider webhook event, as payments needs it: its id
// (the inbox key) and the charge or refund it reports.
type ProviderEvent struct {
	ID     string
	Type   string
	Charge *ChargeResult
	Refund *RefundResult
}

// ApplyProviderEvent applies a verified webhook event once: the event id goes
// into the inbox in the same transaction as the effect, so a repeated
// delivery changes nothing, and a crash between the two leaves neither.
// Events never move a payment or refund backwards, and an event whose
// provider key does not match ours is ignored. applied is false for a
// repeat, or for an event that changed nothing.
func (s *Service) ApplyProviderEvent(ctx context.Context, ev ProviderEvent) (applied bool, err error) {
	if s.pay == nil {
		return false, errNoPayments
	}
	var payment *Payment
	var refund *Refund
	err = s.pay.InTx(ctx, func(ctx context.Context) error {
		isNew, err := s.pay.RecordEvent(ctx, ev.ID, ev.Type, s.now())
		if err != nil || !isNew {
			return err
		}
		switch {
		case ev.Charge != nil:
			p, err := s.pay.FindPayment(ctx, ev.Charge.Reference)
			if errors.Is(err, ErrNotFound) || (err == nil && p.ProviderKey != ev.Charge.Key) {
				return nil // not ours: keep it in the inbox, do nothing
			}
			if err != nil {
				return err
			}
			p, moved, err := s.applyCharge(ctx, p, *ev.Charge)
			if moved {
				payment = &p
			}
			return err
		case ev.Refund != nil:
			r, err := s.pay.FindRefund(ctx, ev.Refund.Reference)
			if errors.Is(err, ErrNotFound) || (err == nil && r.ProviderKey != ev.Refund.Key) {
				return nil
			}
			if err != nil {
				return err
			}
			r, moved, err := s.applyRefund(ctx, r, *ev.Refund)
			if moved {
				refund = &r
			}
			return err
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("apply provider event %s: %w", ev.ID, err)
	}
	s.tellResolved(ctx, payment, refund)
	return payment != nil || refund != nil, nil
}

func (s *Service) tellResolved(ctx context.Context, p *Payment, r *Refund) {
	if s.resolved == nil {
		return
	}
	// The finisher stores the answer of a request that may be long gone:
	// its span links back to that request.
	if p != nil {
		ctx, end := s.tracer.StartLinked(ctx, SpanFinishPayment, p.TraceParent, AttrPaymentID, p.ID)
		s.resolved.PaymentResolved(ctx, *p)
		end(nil)
	}
	if r != nil {
		ctx, end := s.tracer.StartLinked(ctx, SpanFinishRefund, r.TraceParent, AttrRefundID, r.ID)
		s.resolved.RefundResolved(ctx, *r)
		end(nil)
	}
}

// ReconcilerConfig tunes the Reconciler.
type ReconcilerConfig struct {
	// Interval between rounds (RECONCILE_INTERVAL).
	Interval time.Duration
	// PendingAge is how long a payment may stay pending before the
	// reconciler asks the provider about it: long enough that the request
	// that made it is surely gone (the idempotency lock timeout).
	PendingAge time.Duration
	// Batch bounds the payments (and the refunds) looked at per round.
	Batch int
	// OnResult, if set, is told the result of each payment or refund a
	// round looks at (ReconcileResolved, ReconcileUnresolved or
	// ReconcileError), and ReconcileError for a round that could not list
	// its work (metrics). It must be cheap and safe for concurrent use.
	OnResult func(result string)
	// Open, if set, lists the operations whose client record was left
	// open; each round stores the answer of those already settled
	// (through Resolved), which nothing else would do when the client got
	// its answer but the record did not.
	Open OpenOperations
}

// Results of reconciling one payment or refund, as OnResult hears them.
const (
	// ReconcileResolved: the provider gave a definitive outcome, now
	// applied (by this round, or a moment earlier by a webhook).
	ReconcileResolved = "resolved"
	// ReconcileUnresolved: the provider has no call under the key yet; the
	// outcome stays unknown until a later round, a webhook or a retry.
	ReconcileUnresolved = "unresolved"
	// ReconcileError: asking the provider or applying its answer failed.
	ReconcileError = "error"
)

// Reconciler resolves payments and refunds whose provider outcome is
// unknown by asking the provider about their keys.
//
//   - processing (we called, the answer was lost): find the call by key; if
//     the provider has none, repeat it under the same key. The client was
//     told "processing", so completing it is what it expects, and the key
//     makes the repeat safe.
//   - pending for longer than PendingAge (a process died around the call):
//     find the call by key and apply it; if there is none, nothing happened,
//     and the client's retry will resume it.
//
// Several instances may reconcile at once: every state change is a
// conditional update (only from pending or processing), so the first wins
// and the others change nothing; asking the provider twice is harmless.
type Reconciler struct {
	svc *Service
	cfg ReconcilerConfig
	log *slog.Logger
}

// NewReconciler returns a Reconciler for svc (built WithPayments).
func NewReconciler(svc *Service, cfg ReconcilerConfig, log *slog.Logger) *Reconciler {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.PendingAge <= 0 {
		cfg.PendingAge = 30 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if log == nil {
		log = slog.Default()
	}
	return &Reconciler{svc: svc, cfg: cfg, log: log}
}

func (r *Reconciler) report(result string) {
	if r.cfg.OnResult != nil {
		r.cfg.OnResult(result)
	}
}

// Run reconciles every Interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := r.ReconcileOnce(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "reconciler: round failed", "error", err, "resolved", n)
		} else if n > 0 {
			r.log.InfoContext(ctx, "reconciler: resolved unknown outcomes", "resolved", n)
		}
	}
}

// ReconcileOnce runs one round and returns how many payments and refunds it
// resolved.
func (r *Reconciler) ReconcileOnce(ctx context.Context) (int, error) {
	s := r.svc
	pendingBefore := s.now().Add(-r.cfg.PendingAge)
	payments, err := s.pay.UnresolvedPayments(ctx, pendingBefore, r.cfg.Batch)
	if err != nil {
		r.report(ReconcileError)
		return 0, err
	}
	resolved := 0
	var errs []error
	for _, p := range payments {
		moved, err := r.reconcilePayment(ctx, p)
		if err != nil {
			errs = append(errs, err)
		}
		if moved {
			resolved++
		}
	}

	refunds, err := s.pay.UnresolvedRefunds(ctx, pendingBefore, r.cfg.Batch)
	if err != nil {
		r.report(ReconcileError)
		return resolved, errors.Join(append(errs, err)...)
	}
	for _, rf := range refunds {
		moved, err := r.reconcileRefund(ctx, rf)
		if err != nil {
			errs = append(errs, err)
		}
		if moved {
			resolved++
		}
	}
	if r.cfg.Open != nil {
		n, err := r.finishOpen(ctx)
		resolved += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return resolved, errors.Join(errs...)
}

// reconcilePayment asks the provider about one unresolved payment and
// applies its answer, in a span of its own linked to the request that made
// the payment. moved reports that this call settled it.
func (r *Reconciler) reconcilePayment(ctx context.Context, p Payment) (moved bool, err error) {
	s := r.svc
	ctx, end := s.tracer.StartLinked(ctx, SpanReconcilePayment, p.TraceParent, AttrPaymentID, p.ID)
	defer func() { end(err) }()
	res, err := s.provider.FindCharge(ctx, p.ProviderKey)
	if errors.Is(err, ErrProviderNoSuchCall) && p.Status == StatusProcessing {
		res, err = s.provider.Charge(ctx, p.ProviderKey, ChargeRequest{
			Amount: p.Amount, Currency: p.Currency, PaymentMethod: p.PaymentMethod, Reference: p.ID,
		})
	}
	if errors.Is(err, ErrProviderNoSuchCall) {
		r.report(ReconcileUnresolved)
		return false, nil
	}
	if err != nil {
		r.report(ReconcileError)
		return false, fmt.Errorf("payment %s: %w", p.ID, err)
	}
	err = s.pay.InTx(ctx, func(ctx context.Context) error {
		p, moved, err = s.applyCharge(ctx, p, res)
		return err
	})
	if err != nil {
		r.report(ReconcileError)
		return false, fmt.Errorf("payment %s: %w", p.ID, err)
	}
	r.report(ReconcileResolved)
	if moved {
		s.tellResolved(ctx, &p, nil)
	}
	return moved, nil
}

// reconcileRefund is reconcilePayment for one unresolved refund.
func (r *Reconciler) reconcileRefund(ctx context.Context, rf Refund) (moved bool, err error) {
	s := r.svc
	ctx, end := s.tracer.StartLinked(ctx, SpanReconcileRefund, rf.TraceParent, AttrRefundID, rf.ID)
	defer func() { end(err) }()
	res, err := s.provider.FindRefund(ctx, rf.ProviderKey)
	if errors.Is(err, ErrProviderNoSuchCall) && rf.Status == StatusProcessing {
		var p Payment
		if p, err = s.pay.GetPayment(ctx, rf.MerchantID, rf.PaymentID); err == nil {
			res, err = s.provider.Refund(ctx, rf.ProviderKey, RefundRequest{ChargeID: p.ProviderChargeID, Amount: rf.Amount, Reference: rf.ID})
		}
	}
	if errors.Is(err, ErrProviderNoSuchCall) {
		r.report(ReconcileUnresolved)
		return false, nil
	}
	if err != nil {
		r.report(ReconcileError)
		return false, fmt.Errorf("refund %s: %w", rf.ID, err)
	}
	err = s.pay.InTx(ctx, func(ctx context.Context) error {
		rf, moved, err = s.applyRefund(ctx, rf, res)
		return err
	})
	if err != nil {
		r.report(ReconcileError)
		return false, fmt.Errorf("refund %s: %w", rf.ID, err)
	}
	r.report(ReconcileResolved)
	if moved {
		s.tellResolved(ctx, nil, &rf)
	}
	return moved, nil
}

// finishOpen tells Resolved again about each settled payment or refund
// whose client record is still open. That happens when the request
// finished the operation, sent its answer, and then could not store it (the
// database went away for longer than the background retries last): the
// client has what it needs and may never retry, so without this the record
// would stay executing until it expires. An operation not settled yet is
// left to the rounds above, which tell Resolved when it settles.
func (r *Reconciler) finishOpen(ctx context.Context) (int, error) {
	s := r.svc
	ops, err := r.cfg.Open.Abandoned(ctx, r.cfg.Batch)
	if err != nil {
		r.report(ReconcileError)
		return 0, fmt.Errorf("list open operations: %w", err)
	}
	finished := 0
	var errs []error
	for _, op := range ops {
		id := op.ResourceID
		switch {
		case strings.HasPrefix(id, paymentIDPrefix):
			p, err := s.pay.GetPayment(ctx, op.MerchantID, id)
			if err != nil {
				errs = append(errs, fmt.Errorf("payment %s: %w", id, err))
				continue
			}
			if p.Status.Final() {
				s.tellResolved(ctx, &p, nil)
				finished++
			}
		case strings.HasPrefix(id, refundIDPrefix):
			rf, err := s.pay.GetRefund(ctx, op.MerchantID, id)
			if err != nil {
				errs = append(errs, fmt.Errorf("refund %s: %w", id, err))
				continue
			}
			if rf.Status.Final() {
				s.tellResolved(ctx, nil, &rf)
				finished++
			}
		}
	}
	if len(errs) > 0 {
		r.report(ReconcileError)
	}
	return finished, errors.Join(errs...)
}
