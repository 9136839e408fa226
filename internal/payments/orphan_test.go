package payments_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
	"github.com/idemkeys/payments/internal/testkit"
)

// ledgerProvider is a provider a test sets by hand: the charge it makes
// (charged: the amount it takes, 0 for the order's), whether refunds
// execute, and what it holds under each key.
type ledgerProvider struct {
	mu       sync.Mutex
	charged  int64
	refunds  bool // false: every refund is 503, not executed
	charges  map[string]payments.ChargeResult
	refunded map[string]payments.RefundResult
}

func newLedgerProvider() *ledgerProvider {
	return &ledgerProvider{charges: map[string]payments.ChargeResult{}, refunded: map[string]payments.RefundResult{}}
}

func (p *ledgerProvider) Charge(_ context.Context, key string, req payments.ChargeRequest) (payments.ChargeResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.charges[key]; ok {
		return c, nil
	}
	amount := req.Amount
	if p.charged != 0 {
		amount = p.charged
	}
	c := payments.ChargeResult{ChargeID: "ch_" + key[len(key)-6:], Succeeded: true, Reference: req.Reference, Key: key,
		Amount: amount, Currency: req.Currency}
	p.charges[key] = c
	return c, nil
}

func (p *ledgerProvider) FindCharge(_ context.Context, key string) (payments.ChargeResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.charges[key]; ok {
		return c, nil
	}
	return payments.ChargeResult{}, payments.ErrProviderNoSuchCall
}

func (p *ledgerProvider) Refund(_ context.Context, key string, req payments.RefundRequest) (payments.RefundResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.refunded[key]; ok {
		return r, nil
	}
	if !p.refunds {
		return payments.RefundResult{}, payments.ErrProviderNotExecuted
	}
	r := payments.RefundResult{RefundID: "re_" + key[len(key)-6:], Succeeded: true, Reference: req.Reference, Key: key,
		Amount: req.Amount, Currency: "BRL"}
	p.refunded[key] = r
	return r, nil
}

func (p *ledgerProvider) FindRefund(_ context.Context, key string) (payments.RefundResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.refunded[key]; ok {
		return r, nil
	}
	return payments.RefundResult{}, payments.ErrProviderNoSuchCall
}

// operatorWorld is a service on a real database with the ledger provider,
// its keeper, and a way to run a keyed request.
type operatorWorld struct {
	svc    *payments.Service
	keeper *idempotency.Keeper
	prov   *ledgerProvider
	db     *database.DB
	clock  *testkit.Clock
}

func newOperatorWorld(t *testing.T, d database.Dialect) *operatorWorld {
	_, db, clock := setup(t, d)
	store := paymentsdb.New(db.DB)
	records := gormstore.New(db.DB)
	prov := newLedgerProvider()
	keeper := idempotency.New(records, idempotency.Config{
		Transactor: records, Now: clock.Now, LockTimeout: 30 * time.Second, CancelAfter: time.Minute,
	})
	svc := payments.NewService(store, clock.Now, payments.WithPayments(store, prov),
		payments.WithOutsideCalls(keeper, answerOf, refundAnswerOf))
	return &operatorWorld{svc: svc, keeper: keeper, prov: prov, db: db, clock: clock}
}

// keyed runs fn as a Guarded request under key, as op.
func (w *operatorWorld) keyed(key string, fn func(ctx context.Context, op *idempotency.Op)) {
	w.keeper.Guarded(context.Background(), idempotency.Input{
		Scope: "mch_a", Keys: []string{key}, Method: "POST", Path: "/x/" + key, Route: "/x",
	}, func(ctx context.Context, op *idempotency.Op, _ []byte) idempotency.Answer {
		fn(ctx, op)
		return idempotency.Answer{Status: 202}
	})
}

func (w *operatorWorld) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, w.db.Raw(query, args...).Scan(&n).Error)
	return n
}

// TestOrphanRefundIsFlaggedOnce: a refund canceled by the reconciler (it
// never reached the provider), for which the provider then reports a
// succeeded refund, is an orphan refund: flagged for an operator, once
// however often it is reported, and an operator resolves it.
func TestOrphanRefundIsFlaggedOnce(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newOperatorWorld(t, d)
			order, err := w.svc.CreateOrder(ctx, "mch_a", validInput())
			require.NoError(t, err)
			var p payments.Payment
			w.keyed("pay", func(ctx context.Context, op *idempotency.Op) {
				p, err = w.svc.PayOrder(ctx, op, "mch_a", order.ID, payments.PayInput{PaymentMethod: "pm_card_visa"})
			})
			require.NoError(t, err)
			require.Equal(t, payments.StatusSucceeded, p.Status)

			var r payments.Refund
			w.keyed("refund", func(ctx context.Context, op *idempotency.Op) {
				r, err = w.svc.RefundPayment(ctx, op, "mch_a", p.ID, payments.RefundInput{})
			})
			require.ErrorIs(t, err, payments.ErrProviderUnavailable)
			w.clock.Advance(2 * time.Minute)
			_, err = w.keeper.Reconcile(ctx)
			require.NoError(t, err)
			r, err = w.svc.GetRefund(ctx, "mch_a", r.ID)
			require.NoError(t, err)
			require.Equal(t, payments.StatusCanceled, r.Status)

			// The provider now holds a succeeded refund under its key.
			w.prov.mu.Lock()
			w.prov.refunded[r.ProviderKey] = payments.RefundResult{RefundID: "re_late", Succeeded: true, Reference: r.ID,
				Key: r.ProviderKey, Amount: r.Amount, Currency: r.Currency}
			w.prov.mu.Unlock()
			event := func(id string) payments.ProviderEvent {
				return payments.ProviderEvent{ID: id, Type: "refund.succeeded", Refund: &payments.RefundResult{
					RefundID: "re_late", Succeeded: true, Reference: r.ID, Key: r.ProviderKey, Amount: r.Amount, Currency: r.Currency}}
			}
			outcome, err := w.svc.ApplyProviderEvent(ctx, event("evt_1"))
			require.NoError(t, err)
			require.Equal(t, payments.EventOrphan, outcome)
			outcome, err = w.svc.ApplyProviderEvent(ctx, event("evt_2"))
			require.NoError(t, err)
			require.Equal(t, payments.EventRepeat, outcome, "found again: flagged once")
			require.EqualValues(t, 1, w.count(t, "SELECT count(*) FROM orphans WHERE kind = 'refund' AND provider_id = 're_late' AND status = 'flagged'"))
			require.EqualValues(t, 0, w.count(t, "SELECT count(*) FROM outside_calls WHERE kind = 'orphan_refund'"), "a refund cannot be undone by us")

			// The reconciler's late look finds it too, and changes nothing.
			w.clock.Advance(2 * time.Minute)
			_, err = w.keeper.Reconcile(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, w.count(t, "SELECT count(*) FROM orphans"))
			require.EqualValues(t, 0, w.count(t, "SELECT count(*) FROM outside_calls WHERE due_at IS NOT NULL"))

			var id string
			require.NoError(t, w.db.Raw("SELECT id FROM orphans").Row().Scan(&id))
			require.NoError(t, w.svc.ResolveOrphan(ctx, "mch_a", id))
			require.ErrorIs(t, w.svc.ResolveOrphan(ctx, "mch_a", id), payments.ErrOrphanNotFlagged)
			require.ErrorIs(t, w.svc.ResolveOrphan(ctx, "mch_b", id), payments.ErrNotFound, "another merchant's")
			require.EqualValues(t, 1, w.count(t, "SELECT count(*) FROM orphans WHERE status = 'resolved'"))
		})
	}
}

// TestFlaggedChargeWaitsForAnOperator: a charge of another amount than the
// payment's is flagged; the reconciler leaves it alone; retry asks again
// (and flags again, the provider still disagreeing); accept applies it as
// it is and stores the client's answer.
func TestFlaggedChargeWaitsForAnOperator(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newOperatorWorld(t, d)
			w.prov.charged = 1
			order, err := w.svc.CreateOrder(ctx, "mch_a", validInput())
			require.NoError(t, err)
			var p payments.Payment
			w.keyed("pay", func(ctx context.Context, op *idempotency.Op) {
				p, err = w.svc.PayOrder(ctx, op, "mch_a", order.ID, payments.PayInput{PaymentMethod: "pm_card_visa"})
			})
			require.NoError(t, err)
			require.Equal(t, payments.StatusPending, p.Status, "nothing applied")
			flagged := func() int64 {
				return w.count(t, "SELECT count(*) FROM outside_calls WHERE id = ? AND state = 'flagged' AND due_at IS NULL", p.ID)
			}
			require.EqualValues(t, 1, flagged())

			w.clock.Advance(time.Hour)
			_, err = w.keeper.Reconcile(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, flagged(), "outside the reconcile rounds")

			require.Error(t, w.svc.RetryFlagged(ctx, "mch_a", "pay_nope"))
			require.ErrorIs(t, w.svc.RetryFlagged(ctx, "mch_b", p.ID), idempotency.ErrNotFound, "another merchant's")

			require.NoError(t, w.svc.RetryFlagged(ctx, "mch_a", p.ID))
			require.EqualValues(t, 1, w.count(t, "SELECT count(*) FROM outside_calls WHERE id = ? AND state = 'unknown'", p.ID))
			_, err = w.keeper.Reconcile(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, flagged(), "asked again, and the provider still disagrees")
			require.Len(t, w.prov.charges, 1, "asked, not charged again")

			require.NoError(t, w.svc.AcceptFlagged(ctx, "mch_a", p.ID))
			p, err = w.svc.GetPayment(ctx, "mch_a", p.ID)
			require.NoError(t, err)
			require.Equal(t, payments.StatusSucceeded, p.Status)
			require.EqualValues(t, 1, w.count(t, "SELECT count(*) FROM orders WHERE id = ? AND status = 'paid'", order.ID))
			require.EqualValues(t, 1, w.count(t, "SELECT count(*) FROM outside_calls WHERE id = ? AND state = 'done'", p.ID))
			require.Error(t, w.svc.AcceptFlagged(ctx, "mch_a", p.ID), "not flagged any more")
		})
	}
}
