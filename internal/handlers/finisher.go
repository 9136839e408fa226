package handlers

import (
	"context"
	"errors"
	"log/slog"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
)

// recordCompleter is the part of *idempotency.Keeper the finisher uses.
type recordCompleter interface {
	// Finish stores resp as the final answer of the open record of key,
	// if its recovery point names resourceID. It returns
	// idempotency.ErrNotFound, idempotency.ErrLocked or a store error.
	Finish(ctx context.Context, merchantID, key, resourceID string, resp idempotency.Response) error
}

// RecordFinisher closes the idempotency record of a payment or refund that
// was settled outside the request that started it: the request answered 202
// (or died), and later the reconciler or a provider webhook learned the
// outcome. It stores the very answer the handler would have given for the
// final state (PaymentAnswer, RefundAnswer), so the client's next retry with
// its key replays it at once instead of running anything again.
//
// It implements payments.Resolved; the service calls it after the final
// state has committed.
type RecordFinisher struct {
	records recordCompleter
	log     *slog.Logger
}

var _ payments.Resolved = (*RecordFinisher)(nil)

// NewRecordFinisher returns a finisher that stores answers through keeper.
// A nil log means slog.Default(); a nil keeper is a wiring mistake and
// panics here rather than in the reconciler later.
func NewRecordFinisher(keeper *idempotency.Keeper, log *slog.Logger) *RecordFinisher {
	if keeper == nil {
		panic("handlers: NewRecordFinisher needs a keeper")
	}
	if log == nil {
		log = slog.Default()
	}
	return &RecordFinisher{records: keeper, log: log}
}

// PaymentResolved stores the final answer of p's request. A payment that is
// not final yet is left alone: its record must stay open, as a 202 leaves
// it, until the outcome is known.
func (f *RecordFinisher) PaymentResolved(ctx context.Context, p payments.Payment) {
	if !p.Status.Final() {
		f.log.WarnContext(ctx, "idempotency: asked to finish the record of an unsettled payment; left open",
			"merchant_id", p.MerchantID, "payment_id", p.ID, "status", string(p.Status))
		return
	}
	f.finish(ctx, p.MerchantID, p.IdempotencyKey, p.ID, PaymentAnswer(p))
}

// RefundResolved stores the final answer of r's request; like
// PaymentResolved, only for a final refund.
func (f *RecordFinisher) RefundResolved(ctx context.Context, r payments.Refund) {
	if !r.Status.Final() {
		f.log.WarnContext(ctx, "idempotency: asked to finish the record of an unsettled refund; left open",
			"merchant_id", r.MerchantID, "refund_id", r.ID, "status", string(r.Status))
		return
	}
	f.finish(ctx, r.MerchantID, r.IdempotencyKey, r.ID, RefundAnswer(r))
}

// finish stores resp and sorts the outcome for the logs. Two outcomes are
// the normal course of things, not faults: no open record (the request
// itself already stored the final answer, the record expired, or the key now
// belongs to another operation) and a locked record (a retry is running the
// operation right now and will store the answer itself). Anything else is
// worth a warning, but no more: the record stays open, and the client's next
// retry resumes the operation, finds it settled and answers the same.
//
// The idempotency key is never logged; the resource id identifies the
// operation.
func (f *RecordFinisher) finish(ctx context.Context, merchantID, key, resourceID string, resp idempotency.Response) {
	if key == "" {
		f.log.DebugContext(ctx, "idempotency: no client key to finish", "merchant_id", merchantID, "resource_id", resourceID)
		return
	}
	err := f.records.Finish(ctx, merchantID, key, resourceID, resp)
	switch {
	case err == nil:
		f.log.InfoContext(ctx, "idempotency: record finished with the settled outcome",
			"merchant_id", merchantID, "resource_id", resourceID, "status", resp.Status)
	case errors.Is(err, idempotency.ErrNotFound), errors.Is(err, idempotency.ErrLocked):
		f.log.DebugContext(ctx, "idempotency: record left to its request",
			"merchant_id", merchantID, "resource_id", resourceID, "reason", err.Error())
	default:
		f.log.WarnContext(ctx, "idempotency: finishing the record failed; the client's retry will settle it",
			"merchant_id", merchantID, "resource_id", resourceID, "error", err)
	}
}

// recordClaimer is the part of *idempotency.Keeper the fence uses.
type recordClaimer interface {
	// Claim takes the open record of key over. It returns
	// idempotency.ErrNotFound, idempotency.ErrLocked or a store error.
	Claim(ctx context.Context, merchantID, key, resourceID string) (*idempotency.Claim, error)
}

// RecordFence is the reconciler's KeyFence: before it cancels an abandoned
// payment or refund it takes the client's record over through the Keeper,
// and the cancel stores, under that fence and in its own transaction, the
// answer a request gives for the canceled state (PaymentAnswer,
// RefundAnswer: 409 payment_canceled or refund_canceled), so the key
// replays it from then on.
type RecordFence struct {
	records recordClaimer
	log     *slog.Logger
}

var _ payments.KeyFence = (*RecordFence)(nil)

// NewRecordFence returns a fence over keeper's records; a nil log means
// slog.Default().
func NewRecordFence(keeper *idempotency.Keeper, log *slog.Logger) *RecordFence {
	if keeper == nil {
		panic("handlers: NewRecordFence needs a keeper")
	}
	if log == nil {
		log = slog.Default()
	}
	return &RecordFence{records: keeper, log: log}
}

// HoldPayment implements payments.KeyFence.
func (f *RecordFence) HoldPayment(ctx context.Context, p payments.Payment) (payments.Hold, error) {
	canceled := p
	canceled.Status = payments.StatusCanceled
	return f.hold(ctx, p.MerchantID, p.IdempotencyKey, p.ID, PaymentAnswer(canceled))
}

// HoldRefund implements payments.KeyFence.
func (f *RecordFence) HoldRefund(ctx context.Context, r payments.Refund) (payments.Hold, error) {
	canceled := r
	canceled.Status = payments.StatusCanceled
	return f.hold(ctx, r.MerchantID, r.IdempotencyKey, r.ID, RefundAnswer(canceled))
}

func (f *RecordFence) hold(ctx context.Context, merchantID, key, resourceID string, answer idempotency.Response) (payments.Hold, error) {
	if key == "" {
		return nil, nil
	}
	claim, err := f.records.Claim(ctx, merchantID, key, resourceID)
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		return nil, nil // no open record: nothing can resume the operation
	case errors.Is(err, idempotency.ErrLocked):
		return nil, payments.ErrKeyBusy
	case err != nil:
		return nil, err
	}
	return &recordHold{claim: claim, answer: answer, log: f.log, resourceID: resourceID}, nil
}

// recordHold is a claimed record and the answer it will store.
type recordHold struct {
	claim      *idempotency.Claim
	answer     idempotency.Response
	log        *slog.Logger
	resourceID string
}

func (h *recordHold) Canceled(ctx context.Context) error { return h.claim.Complete(ctx, h.answer) }

func (h *recordHold) Published() { h.claim.Published() }

func (h *recordHold) Release(ctx context.Context) {
	if err := h.claim.Release(ctx); err != nil && !errors.Is(err, idempotency.ErrFenced) {
		// The record stays locked until its lock runs out, then a retry
		// resumes it: a delay, not a fault.
		h.log.WarnContext(ctx, "idempotency: giving a held record back failed; it unlocks at its lock timeout",
			"resource_id", h.resourceID, "error", err)
	}
}
