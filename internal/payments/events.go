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
// (the inbox key) and the charge or refund it reports, as the event tells
// it. The event is a hint: ApplyProviderEvent asks the provider before it
// believes any of it.
type ProviderEvent struct {
	ID     string
	Type   string
	Charge *ChargeResult
	Refund *RefundResult
}

// EventOutcome is what became of a provider event.
type EventOutcome string

// The outcomes of ApplyProviderEvent.
const (
	// EventApplied: the provider confirmed the event, and it moved a
	// payment or refund.
	EventApplied EventOutcome = "applied"
	// EventRepeat: confirmed, but it changed nothing (a repeated delivery,
	// or news the payment or refund already had).
	EventRepeat EventOutcome = "repeat"
	// EventUnknown: about no payment or refund of ours; ignored.
	EventUnknown EventOutcome = "unknown"
	// EventForged: the provider does not confirm it (no such call, another
	// charge or refund, another outcome or amount). Nothing changed and the
	// event id is not recorded.
	EventForged EventOutcome = "forged"
	// EventMismatch: the provider confirms a call whose amount or currency
	// differs from ours. Nothing changed: a human must look (an alert).
	EventMismatch EventOutcome = "mismatch"
)

// ErrProviderUnreachable: the provider could not be asked about an event, so
// nothing was applied; the provider is to deliver it again.
var ErrProviderUnreachable = errors.New("the provider could not be asked about the event")

// DefaultEventLookupTimeout bounds the provider lookup of one event.
const DefaultEventLookupTimeout = 5 * time.Second

// ApplyProviderEvent applies a verified webhook event once, and only what the
// provider confirms. A signature says who sent the event, not that it is
// true (a leaked or default secret signs anything), so the event is a hint:
// the payment or refund it names is looked up, the provider is asked about
// it by our own provider key (as the reconciler asks), and what the
// provider answers is applied, after its amount and currency are checked
// against ours. That lookup happens before the inbox transaction, bounded by
// the lookup timeout, so no transaction waits on the provider.
//
// An event that the provider contradicts changes nothing and its id is not
// recorded (EventForged); a provider whose amount or currency differ from
// ours changes nothing either (EventMismatch). A confirmed event goes into
// the inbox in the same transaction as its effect, so a repeated delivery
// changes nothing and a crash between the two leaves neither. Nothing moves
// a payment or refund backwards.
//
// It returns ErrProviderUnreachable (wrapped) when the provider could not
// be asked, or a database error; nothing was applied then.
func (s *Service) ApplyProviderEvent(ctx context.Context, ev ProviderEvent) (EventOutcome, error) {
	if s.pay == nil {
		return "", errNoPayments
	}
	var (
		outcome EventOutcome
		apply   func(ctx context.Context) (moved bool, err error)
		payment *Payment
		refund  *Refund
		err     error
	)
	switch {
	case ev.Charge != nil:
		outcome, apply, err = s.confirmCharge(ctx, ev, &payment)
	case ev.Refund != nil:
		outcome, apply, err = s.confirmRefund(ctx, ev, &refund)
	default:
		return EventUnknown, nil
	}
	if err != nil || apply == nil {
		s.observeEvent(outcome)
		if err != nil {
			return outcome, fmt.Errorf("provider event %s: %w", ev.ID, err)
		}
		return outcome, nil
	}
	var moved bool
	err = s.pay.InTx(ctx, func(ctx context.Context) error {
		isNew, err := s.pay.RecordEvent(ctx, ev.ID, ev.Type, s.now())
		if err != nil || !isNew {
			return err
		}
		moved, err = apply(ctx)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("apply provider event %s: %w", ev.ID, err)
	}
	outcome = EventRepeat
	if moved {
		outcome = EventApplied
		s.tellResolved(ctx, payment, refund)
	}
	s.observeEvent(outcome)
	return outcome, nil
}

// lookupContext bounds one provider lookup made for an event.
func (s *Service) lookupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.eventLookup
	if d <= 0 {
		d = DefaultEventLookupTimeout
	}
	return context.WithTimeout(ctx, d)
}

// confirmCharge asks the provider about the payment a charge event names.
// It returns the outcome so far and, when the provider confirms the event,
// apply, which applies the provider's answer inside the inbox transaction
// and leaves the moved payment in *moved.
func (s *Service) confirmCharge(ctx context.Context, ev ProviderEvent, moved **Payment) (EventOutcome, func(context.Context) (bool, error), error) {
	p, err := s.pay.FindPayment(ctx, ev.Charge.Reference)
	switch {
	case errors.Is(err, ErrNotFound):
		return EventUnknown, nil, nil
	case err != nil:
		return "", nil, err
	case p.ProviderKey != ev.Charge.Key && ev.Charge.Key != "":
		// Our payment, but not our key: nothing the provider could have
		// sent about it.
		s.eventLog(ctx, "webhook: event names our payment under another key; not believed", ev, p.ID)
		return EventForged, nil, nil
	}
	lookupCtx, cancel := s.lookupContext(ctx)
	res, err := s.provider.FindCharge(lookupCtx, p.ProviderKey)
	cancel()
	switch {
	case errors.Is(err, ErrProviderNoSuchCall):
		s.eventLog(ctx, "webhook: the provider has no charge for this payment; event not believed", ev, p.ID)
		return EventForged, nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("%w: %w", ErrProviderUnreachable, err)
	}
	said := eventClaim{ev.Charge.ChargeID, ev.Charge.Succeeded, ev.Charge.Amount, ev.Charge.Currency}
	found := eventClaim{res.ChargeID, res.Succeeded, res.Amount, res.Currency}
	if outcome, ok := s.judgeEvent(ctx, ev, p.ID, p.Amount, p.Currency, said, found); !ok {
		return outcome, nil, nil
	}
	return "", func(ctx context.Context) (bool, error) {
		next, ok, err := s.applyCharge(ctx, p, res)
		if ok {
			*moved = &next
		}
		return ok, err
	}, nil
}

// confirmRefund is confirmCharge for a refund event.
func (s *Service) confirmRefund(ctx context.Context, ev ProviderEvent, moved **Refund) (EventOutcome, func(context.Context) (bool, error), error) {
	r, err := s.pay.FindRefund(ctx, ev.Refund.Reference)
	switch {
	case errors.Is(err, ErrNotFound):
		return EventUnknown, nil, nil
	case err != nil:
		return "", nil, err
	case r.ProviderKey != ev.Refund.Key && ev.Refund.Key != "":
		s.eventLog(ctx, "webhook: event names our refund under another key; not believed", ev, r.ID)
		return EventForged, nil, nil
	}
	lookupCtx, cancel := s.lookupContext(ctx)
	res, err := s.provider.FindRefund(lookupCtx, r.ProviderKey)
	cancel()
	switch {
	case errors.Is(err, ErrProviderNoSuchCall):
		s.eventLog(ctx, "webhook: the provider has no refund for this refund; event not believed", ev, r.ID)
		return EventForged, nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("%w: %w", ErrProviderUnreachable, err)
	}
	said := eventClaim{ev.Refund.RefundID, ev.Refund.Succeeded, ev.Refund.Amount, ev.Refund.Currency}
	found := eventClaim{res.RefundID, res.Succeeded, res.Amount, res.Currency}
	if outcome, ok := s.judgeEvent(ctx, ev, r.ID, r.Amount, r.Currency, said, found); !ok {
		return outcome, nil, nil
	}
	return "", func(ctx context.Context) (bool, error) {
		next, ok, err := s.applyRefund(ctx, r, res)
		if ok {
			*moved = &next
		}
		return ok, err
	}, nil
}

// eventClaim is what a charge or refund event says happened, or what the
// provider answered when asked: the provider's id, the outcome, and the
// money (an event may leave amount and currency out).
type eventClaim struct {
	id        string
	succeeded bool
	amount    int64
	currency  string
}

// judgeEvent holds an event to the provider's answer, and the answer to our
// own payment or refund (id, amount, currency). ok means the event may be
// applied; otherwise the outcome says why not, logged: the provider
// contradicts the event (forged), or the provider and we disagree on the
// money (mismatch, an alert).
func (s *Service) judgeEvent(ctx context.Context, ev ProviderEvent, ourID string, ourAmount int64, ourCurrency string, said, found eventClaim) (EventOutcome, bool) {
	switch {
	case found.id != said.id || found.succeeded != said.succeeded ||
		(said.amount != 0 && said.amount != found.amount) || (said.currency != "" && said.currency != found.currency):
		s.eventLog(ctx, "webhook: the provider contradicts the event; not believed", ev, ourID)
		return EventForged, false
	case found.amount != ourAmount || found.currency != ourCurrency:
		s.log.ErrorContext(ctx, "webhook: the provider's answer differs from ours in amount or currency; nothing applied",
			"event_id", ev.ID, "type", ev.Type, "resource_id", ourID, "amount", ourAmount, "currency", ourCurrency,
			"provider_amount", found.amount, "provider_currency", found.currency)
		return EventMismatch, false
	}
	return "", true
}

// eventLog logs an event the provider does not confirm: signed, so sent by
// someone who holds the webhook secret, which is worth a warning.
func (s *Service) eventLog(ctx context.Context, msg string, ev ProviderEvent, id string) {
	s.log.WarnContext(ctx, msg, "event_id", ev.ID, "type", ev.Type, "resource_id", id)
}

func (s *Service) observeEvent(o EventOutcome) {
	if s.onEvent != nil && o != "" {
		s.onEvent(string(o))
	}
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
	// CancelAfter (PENDING_CANCEL_AFTER) is how long a pending payment or
	// refund may go without an attempt before the reconciler cancels it,
	// once the provider confirms it has no call under the key. Zero never
	// cancels. It must exceed the lock timeout, so that no request still
	// holds the key's lock when its attempt is that old.
	CancelAfter time.Duration
	// Fence takes the key's record over before a cancel; required for
	// cancels (without it, nothing is canceled).
	Fence KeyFence
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
	// ReconcileCanceled: the payment or refund never reached the provider
	// and had no attempt for CancelAfter; canceled.
	ReconcileCanceled = "canceled"
)

// Reconciler resolves payments and refunds whose provider outcome is
// unknown by asking the provider about their keys.
//
//   - processing (we called, the answer was lost): find the call by key; if
//     the provider has none, repeat it under the same key. The client was
//     told "processing", so completing it is what it expects, and the key
//     makes the repeat safe.
//   - pending for longer than PendingAge (a process died around the call,
//     or the provider was unavailable): find the call by key and apply it;
//     if there is none, nothing happened, and the client's retry will
//     resume it.
//   - pending with no attempt for CancelAfter (the client gave up after a
//     502): take the key's record over (KeyFence), ask the provider, and if
//     it has no call under the key, cancel it in one transaction that
//     re-checks the attempt time and stores the key's final answer under
//     the fence. A late retry either resumed first (its attempt time is
//     new, or it holds the lock) and wins, or finds it canceled. A
//     processing payment is never canceled: it may have been charged.
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
	if r.due(p.Status, p.LastAttemptAt) {
		return r.cancelPayment(ctx, p)
	}
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
	if r.due(rf.Status, rf.LastAttemptAt) {
		return r.cancelRefund(ctx, rf)
	}
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

// due reports whether a payment or refund is a candidate for a cancel: still
// pending (never processing: that one may have been charged) and without an
// attempt for CancelAfter.
func (r *Reconciler) due(st Status, lastAttempt time.Time) bool {
	return st == StatusPending && r.cfg.CancelAfter > 0 && r.cfg.Fence != nil &&
		lastAttempt.Before(r.svc.now().Add(-r.cfg.CancelAfter))
}

// cancelPayment ends an abandoned pending payment: it holds the key's
// record, asks the provider, and either applies the charge the provider
// did make after all, or cancels in one transaction that re-checks, under
// the order's and the payment's row locks, that the payment is still
// pending with no new attempt, and stores the key's 409 payment_canceled
// under the fence. The order is then payable again (a canceled payment is
// not active).
func (r *Reconciler) cancelPayment(ctx context.Context, p Payment) (bool, error) {
	s := r.svc
	hold, err := r.cfg.Fence.HoldPayment(ctx, p)
	switch {
	case errors.Is(err, ErrKeyBusy):
		r.report(ReconcileUnresolved)
		return false, nil
	case err != nil:
		r.report(ReconcileError)
		return false, fmt.Errorf("payment %s: hold its key: %w", p.ID, err)
	}
	release := func() {
		if hold != nil {
			hold.Release(ctx)
		}
	}
	res, err := s.provider.FindCharge(ctx, p.ProviderKey)
	if err == nil {
		// It reached the provider after all: settle it as usual, with the
		// record given back first so that the finisher may store the
		// answer.
		release()
		var moved bool
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
	if !errors.Is(err, ErrProviderNoSuchCall) {
		release()
		r.report(ReconcileError)
		return false, fmt.Errorf("payment %s: %w", p.ID, err)
	}
	canceled := false
	err = s.pay.InTx(ctx, func(ctx context.Context) error {
		if _, err := s.pay.LockOrder(ctx, p.MerchantID, p.OrderID); err != nil {
			return err
		}
		cur, err := s.pay.LockPayment(ctx, p.MerchantID, p.ID)
		if err != nil {
			return err
		}
		if !r.due(cur.Status, cur.LastAttemptAt) {
			return nil // a retry came first: it wins
		}
		next := cur
		next.Status, next.UpdatedAt = StatusCanceled, s.now()
		ok, err := s.pay.MovePayment(ctx, next, StatusPending)
		if err != nil || !ok {
			return err
		}
		if err := s.emit(ctx, p.MerchantID, EventPaymentCanceled, paymentEvent{
			ID: next.ID, OrderID: next.OrderID, Amount: next.Amount, Currency: next.Currency, Status: string(next.Status),
		}, next.UpdatedAt); err != nil {
			return err
		}
		if hold != nil {
			if err := hold.Canceled(ctx); err != nil {
				return err
			}
		}
		canceled = true
		return nil
	})
	if err != nil || !canceled {
		release()
		if err != nil {
			r.report(ReconcileError)
			return false, fmt.Errorf("cancel payment %s: %w", p.ID, err)
		}
		r.report(ReconcileUnresolved)
		return false, nil
	}
	if hold != nil {
		hold.Published()
	}
	r.log.InfoContext(ctx, "reconciler: canceled a payment that never reached the provider",
		"merchant_id", p.MerchantID, "payment_id", p.ID, "last_attempt_at", p.LastAttemptAt)
	r.report(ReconcileCanceled)
	return true, nil
}

// cancelRefund is cancelPayment for a refund; the cancel releases what it
// reserved of the payment (a canceled refund is not counted).
func (r *Reconciler) cancelRefund(ctx context.Context, rf Refund) (bool, error) {
	s := r.svc
	hold, err := r.cfg.Fence.HoldRefund(ctx, rf)
	switch {
	case errors.Is(err, ErrKeyBusy):
		r.report(ReconcileUnresolved)
		return false, nil
	case err != nil:
		r.report(ReconcileError)
		return false, fmt.Errorf("refund %s: hold its key: %w", rf.ID, err)
	}
	release := func() {
		if hold != nil {
			hold.Release(ctx)
		}
	}
	res, err := s.provider.FindRefund(ctx, rf.ProviderKey)
	if err == nil {
		release()
		var moved bool
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
	if !errors.Is(err, ErrProviderNoSuchCall) {
		release()
		r.report(ReconcileError)
		return false, fmt.Errorf("refund %s: %w", rf.ID, err)
	}
	canceled := false
	err = s.pay.InTx(ctx, func(ctx context.Context) error {
		// The payment's row first, as a new refund takes it.
		if _, err := s.pay.LockPayment(ctx, rf.MerchantID, rf.PaymentID); err != nil {
			return err
		}
		cur, err := s.pay.LockRefund(ctx, rf.MerchantID, rf.ID)
		if err != nil {
			return err
		}
		if !r.due(cur.Status, cur.LastAttemptAt) {
			return nil
		}
		next := cur
		next.Status, next.UpdatedAt = StatusCanceled, s.now()
		ok, err := s.pay.MoveRefund(ctx, next, StatusPending)
		if err != nil || !ok {
			return err
		}
		if err := s.emit(ctx, rf.MerchantID, EventRefundCanceled, refundEvent{
			ID: next.ID, PaymentID: next.PaymentID, Amount: next.Amount, Currency: next.Currency, Status: string(next.Status),
		}, next.UpdatedAt); err != nil {
			return err
		}
		if hold != nil {
			if err := hold.Canceled(ctx); err != nil {
				return err
			}
		}
		canceled = true
		return nil
	})
	if err != nil || !canceled {
		release()
		if err != nil {
			r.report(ReconcileError)
			return false, fmt.Errorf("cancel refund %s: %w", rf.ID, err)
		}
		r.report(ReconcileUnresolved)
		return false, nil
	}
	if hold != nil {
		hold.Published()
	}
	r.log.InfoContext(ctx, "reconciler: canceled a refund that never reached the provider",
		"merchant_id", rf.MerchantID, "refund_id", rf.ID, "last_attempt_at", rf.LastAttemptAt)
	r.report(ReconcileCanceled)
	return true, nil
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
