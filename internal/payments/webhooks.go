package payments

import (
	"context"
	"errors"
	"fmt"
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
	// EventOrphan: the provider confirms a succeeded charge or refund for a
	// payment or refund that ended without one: the charge is refunded
	// automatically, the refund flagged (orphan.go).
	EventOrphan EventOutcome = "orphan"
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
// A signed flood must not become provider load: an event id the inbox
// already holds is answered from it (EventRepeat) before anything else,
// concurrent lookups of one provider key share one call, the provider's
// final answers are reused for DefaultEventCacheTTL (eventlookups.go; never
// its "no such call", which a racing real event would turn into a lie), and
// after an answer that is not final the provider is asked about that call
// again at most every DefaultEventLookupInterval: an event arriving
// meanwhile is answered with that answer at once (not believed, while the
// provider has no call), and one lookup at the interval's end settles the
// payment or refund if the provider has made the call by then.
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
		apply   func(ctx context.Context) (string, error)
		err     error
	)
	if ev.Charge == nil && ev.Refund == nil {
		return EventUnknown, nil
	}
	// A delivery of an event already applied is answered from the inbox:
	// redeliveries, however many, cost the provider nothing.
	seen, err := s.pay.EventRecorded(ctx, ev.ID)
	if err != nil {
		return "", fmt.Errorf("provider event %s: %w", ev.ID, err)
	}
	if seen {
		s.observeEvent(EventRepeat)
		return EventRepeat, nil
	}
	switch {
	case ev.Charge != nil:
		outcome, apply, err = s.confirmCharge(ctx, ev)
	case ev.Refund != nil:
		outcome, apply, err = s.confirmRefund(ctx, ev)
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
	applied := "repeat"
	err = s.pay.InTx(ctx, func(ctx context.Context) error {
		isNew, err := s.pay.RecordEvent(ctx, ev.ID, ev.Type, s.now())
		if err != nil || !isNew {
			return err
		}
		applied, err = apply(ctx)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("apply provider event %s: %w", ev.ID, err)
	}
	switch applied {
	case "flagged":
		outcome = EventMismatch
	case "orphan":
		outcome = EventOrphan
	case "applied":
		outcome = EventApplied
	default:
		outcome = EventRepeat
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
// through the payments' skeleton (the one money check, the client's answer
// stored).
func (s *Service) confirmCharge(ctx context.Context, ev ProviderEvent) (EventOutcome, func(context.Context) (string, error), error) {
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
	res, err := s.chargeAnswers.find(lookupCtx, p.ProviderKey, s.provider.FindCharge, func(ctx context.Context, res ChargeResult) {
		_, applied, err := s.charges.Apply(ctx, p.MerchantID, p.ID, res)
		s.trailed(ctx, "payment", p.ID, applied, err)
	})
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
	if !s.believe(ctx, ev, p.ID, said, found) {
		return EventForged, nil, nil
	}
	return "", func(ctx context.Context) (string, error) {
		_, applied, err := s.charges.Apply(ctx, p.MerchantID, p.ID, res)
		return applied, err
	}, nil
}

// confirmRefund is confirmCharge for a refund event.
func (s *Service) confirmRefund(ctx context.Context, ev ProviderEvent) (EventOutcome, func(context.Context) (string, error), error) {
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
	res, err := s.refundAnswers.find(lookupCtx, r.ProviderKey, s.provider.FindRefund, func(ctx context.Context, res RefundResult) {
		_, applied, err := s.refunds.Apply(ctx, r.MerchantID, r.ID, res)
		s.trailed(ctx, "refund", r.ID, applied, err)
	})
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
	if !s.believe(ctx, ev, r.ID, said, found) {
		return EventForged, nil, nil
	}
	return "", func(ctx context.Context) (string, error) {
		_, applied, err := s.refunds.Apply(ctx, r.MerchantID, r.ID, res)
		return applied, err
	}, nil
}

// trailed logs what a trailing lookup (see finalAnswers) did with the
// provider's answer about a payment or refund that events named while its
// lookups were paced: settled it, or found it settled already.
func (s *Service) trailed(ctx context.Context, kind, id, applied string, err error) {
	if s.log == nil {
		return
	}
	if err != nil {
		s.log.WarnContext(ctx, "webhook: settling what the provider answered after paced events failed; the reconciler settles it",
			"kind", kind, "resource_id", id, "error", err)
		return
	}
	s.log.InfoContext(ctx, "webhook: the provider's answer after paced events", "kind", kind, "resource_id", id, "outcome", applied)
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

// believe holds an event to the provider's answer: the provider must name
// the same charge or refund, with the same outcome and, where the event
// says, the same money. A contradicted event is logged and not believed.
// Whether the provider's answer agrees with ours is the skeleton's one
// money check (checkCharge, checkRefund), which every path shares.
func (s *Service) believe(ctx context.Context, ev ProviderEvent, ourID string, said, found eventClaim) bool {
	if found.id != said.id || found.succeeded != said.succeeded ||
		(said.amount != 0 && said.amount != found.amount) || (said.currency != "" && said.currency != found.currency) {
		s.eventLog(ctx, "webhook: the provider contradicts the event; not believed", ev, ourID)
		return false
	}
	return true
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
