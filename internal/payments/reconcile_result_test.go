package payments_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
	"github.com/idemkeys/payments/internal/testkit"
)

// methodProvider answers by the payment method a charge was made with:
// "lost" charges but the answer is lost (found later), "broken" is lost and
// cannot be looked up either. A key never charged has no call.
type methodProvider struct {
	mu      sync.Mutex
	charges map[string]payments.ChargeRequest // provider key → what was asked
}

func (p *methodProvider) Charge(_ context.Context, key string, req payments.ChargeRequest) (payments.ChargeResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.charges[key] = req
	return payments.ChargeResult{}, payments.ErrProviderUnknown
}

func (p *methodProvider) FindCharge(_ context.Context, key string) (payments.ChargeResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	req := p.charges[key]
	switch req.PaymentMethod {
	case "":
		return payments.ChargeResult{}, payments.ErrProviderNoSuchCall
	case "pm_lost":
		return payments.ChargeResult{ChargeID: "ch_1", Succeeded: true, Key: key, Reference: req.Reference,
			Amount: req.Amount, Currency: req.Currency}, nil
	default:
		return payments.ChargeResult{}, payments.ErrProviderNotExecuted
	}
}

func (p *methodProvider) Refund(context.Context, string, payments.RefundRequest) (payments.RefundResult, error) {
	return payments.RefundResult{}, payments.ErrProviderNotExecuted
}

func (p *methodProvider) FindRefund(context.Context, string) (payments.RefundResult, error) {
	return payments.RefundResult{}, payments.ErrProviderNoSuchCall
}

// crashingStore is the idempotency store, but the first intent it is asked
// to record fails after it was told to (crash is set), as if the process
// died between creating a payment and calling the provider.
type crashingStore struct {
	idempotency.Store
	mu    sync.Mutex
	crash bool
}

func (s *crashingStore) SaveCall(ctx context.Context, c *idempotency.Call) error {
	s.mu.Lock()
	crash := s.crash && c.State == idempotency.CallCalling
	s.mu.Unlock()
	if crash {
		return errors.New("crashed before calling the provider")
	}
	return s.Store.SaveCall(ctx, c)
}

// TestReconcilerReportsEachResult: OnReconcile hears resolved for an
// unknown outcome the provider knows, unresolved for a pending payment the
// provider has no call for, and error when the provider cannot be asked.
func TestReconcilerReportsEachResult(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			_, db, clock := setup(t, d)
			ctx := context.Background()
			store := paymentsdb.New(db.DB)
			prov := &methodProvider{charges: map[string]payments.ChargeRequest{}}
			records := gormstore.New(db.DB)
			crashing := &crashingStore{Store: records}
			var mu sync.Mutex
			results := map[string]int{}
			keeper := idempotency.New(crashing, idempotency.Config{
				Transactor: records, Now: clock.Now, LockTimeout: 30 * time.Second,
				OnReconcile: func(_, result string) {
					mu.Lock()
					defer mu.Unlock()
					results[result]++
				},
			})
			svc := payments.NewService(store, clock.Now, payments.WithPayments(store, prov),
				payments.WithOutsideCalls(keeper, answerOf, refundAnswerOf))
			pay := func(method string) payments.Payment {
				t.Helper()
				order, err := svc.CreateOrder(ctx, "mch_a", validInput())
				require.NoError(t, err)
				var p payments.Payment
				keeper.Guarded(ctx, idempotency.Input{
					Scope: "mch_a", Keys: []string{"key-" + method}, Method: "POST", Path: "/pay/" + order.ID, Route: "/pay/:id",
				}, func(ctx context.Context, op *idempotency.Op, _ []byte) idempotency.Answer {
					p, _ = svc.PayOrder(ctx, op, "mch_a", order.ID, payments.PayInput{PaymentMethod: method})
					return idempotency.Answer{Status: 202}
				})
				return p
			}
			require.Equal(t, payments.StatusProcessing, pay("pm_lost").Status)
			require.Equal(t, payments.StatusProcessing, pay("pm_broken").Status)
			crashing.mu.Lock()
			crashing.crash = true
			crashing.mu.Unlock()
			require.Equal(t, payments.StatusPending, pay("pm_crashed").Status)
			clock.Advance(time.Minute) // the pending one is now old enough to ask about

			n, err := keeper.Reconcile(ctx)
			require.ErrorIs(t, err, payments.ErrProviderNotExecuted)
			require.Equal(t, 1, n)
			require.Equal(t, map[string]int{
				"resolved":   1,
				"unresolved": 1,
				"error":      1,
			}, results)
		})
	}
}

// answerOf and refundAnswerOf stand in for the HTTP layer's answers.
func answerOf(p payments.Payment) idempotency.Answer {
	return idempotency.Answer{Status: 201, Body: []byte(p.ID), Final: p.Status.Final()}
}

func refundAnswerOf(r payments.Refund) idempotency.Answer {
	return idempotency.Answer{Status: 201, Body: []byte(r.ID), Final: r.Status.Final()}
}
