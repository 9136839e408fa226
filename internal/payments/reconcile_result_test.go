package payments_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/testkit"
)

// methodProvider answers by the payment method a charge was made with:
// "lost" charges but the answer is lost (found later), "broken" is lost and
// cannot be looked up either. A key never charged has no call.
type methodProvider struct {
	mu      sync.Mutex
	methods map[string]string // provider key → payment method
}

func (p *methodProvider) Charge(_ context.Context, key string, req payments.ChargeRequest) (payments.ChargeResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.methods[key] = req.PaymentMethod
	return payments.ChargeResult{}, payments.ErrProviderUnknown
}

func (p *methodProvider) FindCharge(_ context.Context, key string) (payments.ChargeResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.methods[key] {
	case "":
		return payments.ChargeResult{}, payments.ErrProviderNoSuchCall
	case "pm_lost":
		return payments.ChargeResult{ChargeID: "ch_1", Succeeded: true, Key: key}, nil
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

// freshRecovery is a new operation's recovery: nothing durable yet.
type freshRecovery struct{}

func (freshRecovery) RecoveryPoint() (string, string)                  { return "started", "" }
func (freshRecovery) Checkpoint(context.Context, string, string) error { return nil }

// TestReconcilerReportsEachResult: OnResult hears resolved for an unknown
// outcome the provider knows, unresolved for a pending payment the provider
// has no call for, and error when the provider cannot be asked.
func TestReconcilerReportsEachResult(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			_, db, clock := setup(t, d)
			ctx := context.Background()
			store := payments.NewGormStore(db.DB)
			prov := &methodProvider{methods: map[string]string{}}
			var crash sync.Mutex
			crashAfterCreate := false
			svc := payments.NewService(store, clock.Now, payments.WithPayments(store, prov),
				payments.WithPhaseHook(func(_ context.Context, phase string) error {
					crash.Lock()
					defer crash.Unlock()
					if crashAfterCreate && phase == payments.PhaseCreated {
						return errors.New("crashed before calling the provider")
					}
					return nil
				}))
			pay := func(method string) payments.Payment {
				t.Helper()
				order, err := svc.CreateOrder(ctx, "mch_a", validInput())
				require.NoError(t, err)
				p, _ := svc.PayOrder(ctx, "mch_a", order.ID, "key-"+method, payments.PayInput{PaymentMethod: method}, freshRecovery{})
				return p
			}
			require.Equal(t, payments.StatusProcessing, pay("pm_lost").Status)
			require.Equal(t, payments.StatusProcessing, pay("pm_broken").Status)
			crash.Lock()
			crashAfterCreate = true
			crash.Unlock()
			require.Equal(t, payments.StatusPending, pay("pm_crashed").Status)
			clock.Advance(time.Minute) // the pending one is now old enough to ask about

			var mu sync.Mutex
			results := map[string]int{}
			r := payments.NewReconciler(svc, payments.ReconcilerConfig{PendingAge: 30 * time.Second, OnResult: func(result string) {
				mu.Lock()
				defer mu.Unlock()
				results[result]++
			}}, nil)
			n, err := r.ReconcileOnce(ctx)
			require.ErrorIs(t, err, payments.ErrProviderNotExecuted)
			require.Equal(t, 1, n)
			require.Equal(t, map[string]int{
				payments.ReconcileResolved:   1,
				payments.ReconcileUnresolved: 1,
				payments.ReconcileError:      1,
			}, results)
		})
	}
}
