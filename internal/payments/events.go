package payments

import (
	"context"
	"errors"
	"time"
)

// The outbox events of a payment and of a refund, one per state it ends
// in, written by every path that moves one there: a request, the
// reconciler, a webhook, an operator's command (api flagged), and the
// repair below.

// emitPayment writes the event of p's final state (payment.succeeded,
// payment.failed, payment.canceled) in the caller's transaction.
func (s *Service) emitPayment(ctx context.Context, p Payment) error {
	return s.emit(ctx, p.MerchantID, "payment."+string(p.Status), paymentEvent{
		ID: p.ID, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency, Status: string(p.Status),
		ProviderChargeID: p.ProviderChargeID, DeclineCode: p.DeclineCode,
	}, p.UpdatedAt)
}

// emitRefund writes the event of r's final state (refund.succeeded,
// refund.canceled; a failed refund moved no money and has none).
func (s *Service) emitRefund(ctx context.Context, r Refund) error {
	return s.emit(ctx, r.MerchantID, "refund."+string(r.Status), refundEvent{
		ID: r.ID, PaymentID: r.PaymentID, Amount: r.Amount, Currency: r.Currency, Status: string(r.Status),
	}, r.UpdatedAt)
}

// EventGaps finds the payments and refunds that reached a final state
// (payments: succeeded, failed, canceled; refunds: succeeded, canceled)
// since a time and have no outbox event of that state (paymentsdb.Store).
type EventGaps interface {
	WithoutEvents(ctx context.Context, since time.Time, limit int) ([]Payment, []Refund, error)
}

// errNoEvents: RepairEvents on a Service without its outbox.
var errNoEvents = errors.New("payments: the service has no outbox (WithEvents)")

// RepairEvents is api repair-events: it writes the missing event of every
// payment and refund that ended since since without one, dated when it
// ended, and returns how many it wrote. Before, an operator's api flagged
// accept moved a payment to succeeded, and its order to paid, without the
// payment.succeeded event that fulfilment waits for. Run again, it finds
// nothing left to write; it must not run twice at once.
func (s *Service) RepairEvents(ctx context.Context, gaps EventGaps, since time.Time) (int, error) {
	if s.events == nil {
		return 0, errNoEvents
	}
	written := 0
	for {
		ps, rs, err := gaps.WithoutEvents(ctx, since, 200)
		if err != nil || len(ps)+len(rs) == 0 {
			return written, err
		}
		err = s.inTx(ctx, func(ctx context.Context) error {
			for _, p := range ps {
				if err := s.emitPayment(ctx, p); err != nil {
					return err
				}
			}
			for _, r := range rs {
				if err := s.emitRefund(ctx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return written, err
		}
		written += len(ps) + len(rs)
	}
}
