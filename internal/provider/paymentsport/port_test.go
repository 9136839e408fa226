package paymentsport_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/provider/paymentsport"
)

// newPort serves a provider and returns the port the payments service would
// use, over real HTTP. Each test gets a client of its own, so one test's
// failures never open another's breaker.
func newPort(t *testing.T, timeout time.Duration) *paymentsport.PaymentsPort {
	t.Helper()
	running := startProvider(t, provider.Config{})
	return paymentsport.New(provider.NewClient(running.URL, provider.ClientOptions{Timeout: timeout}))
}

// uniqueKey returns a provider key of its own for each call, so subtests
// never meet each other's charges.
func uniqueKey(t *testing.T) string {
	return fmt.Sprintf("k_%s_%d", t.Name(), time.Now().UnixNano())
}

func chargeReq(method string) payments.ChargeRequest {
	return payments.ChargeRequest{Amount: 2500, Currency: "BRL", PaymentMethod: method, Reference: "pay_1"}
}

func TestPortCharge(t *testing.T) {
	t.Parallel()
	port := newPort(t, 5*time.Second)
	tests := []struct {
		name        string
		req         payments.ChargeRequest
		succeeded   bool
		declineCode string
		hasChargeID bool
	}{
		{"succeeds", chargeReq(provider.MethodCardVisa), true, "", true},
		{"declined", chargeReq(provider.MethodCardDeclined), false, provider.DeclineCardDeclined, true},
		{"insufficient funds", chargeReq(provider.MethodCardInsufficientFunds), false, provider.DeclineInsufficientFunds, true},
		{"an unknown payment method is a decline, not an error", chargeReq("pm_card_unknown"), false, paymentsport.DeclineInvalidPaymentMethod, false},
		{"another refusal keeps the provider's code", payments.ChargeRequest{Amount: 2500, Currency: "brl", PaymentMethod: provider.MethodCardVisa, Reference: "pay_1"},
			false, provider.CodeValidationFailed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := uniqueKey(t)
			got, err := port.Charge(t.Context(), key, tt.req)
			require.NoError(t, err)
			require.Equal(t, tt.succeeded, got.Succeeded)
			require.Equal(t, tt.declineCode, got.DeclineCode)
			require.Equal(t, tt.hasChargeID, got.ChargeID != "", got.ChargeID)
			require.Equal(t, "pay_1", got.Reference)
			require.Equal(t, key, got.Key)

			t.Run("found by key as charged", func(t *testing.T) {
				found, err := port.FindCharge(t.Context(), key)
				if !tt.hasChargeID {
					// A refused request charged nothing, so there is nothing
					// to find: the failed payment tells the truth.
					require.ErrorIs(t, err, payments.ErrProviderNoSuchCall)
					return
				}
				require.NoError(t, err)
				require.Equal(t, got, found)
			})
		})
	}
}

func TestPortChargeErrors(t *testing.T) {
	t.Parallel()

	t.Run("not executed, then the same key succeeds", func(t *testing.T) {
		t.Parallel()
		port := newPort(t, 5*time.Second)
		key := uniqueKey(t)
		_, err := port.Charge(t.Context(), key, chargeReq(provider.MethodFaultUnavailable))
		require.ErrorIs(t, err, payments.ErrProviderNotExecuted)
		require.ErrorIs(t, err, provider.ErrNotExecuted, "the provider's sentinel stays visible")
		require.NotErrorIs(t, err, payments.ErrProviderUnknown)

		_, err = port.FindCharge(t.Context(), key)
		require.ErrorIs(t, err, payments.ErrProviderNoSuchCall, "nothing was charged")

		got, err := port.Charge(t.Context(), key, chargeReq(provider.MethodFaultUnavailable))
		require.NoError(t, err)
		require.True(t, got.Succeeded)
	})

	t.Run("unknown outcome, settled by a lookup and by a retry", func(t *testing.T) {
		t.Parallel()
		port := newPort(t, 300*time.Millisecond)
		key := uniqueKey(t)
		_, err := port.Charge(t.Context(), key, chargeReq(provider.MethodFaultLostResponse))
		require.ErrorIs(t, err, payments.ErrProviderUnknown)
		require.ErrorIs(t, err, provider.ErrUnknownOutcome)
		require.NotErrorIs(t, err, payments.ErrProviderNotExecuted)

		found, err := port.FindCharge(t.Context(), key)
		require.NoError(t, err)
		require.True(t, found.Succeeded, "the charge was made although its answer was lost")

		retried, err := port.Charge(t.Context(), key, chargeReq(provider.MethodFaultLostResponse))
		require.NoError(t, err)
		require.Equal(t, found, retried, "the same charge, not a second one")
	})

	t.Run("a key reused for another request is unknown, never failed", func(t *testing.T) {
		t.Parallel()
		port := newPort(t, 5*time.Second)
		key := uniqueKey(t)
		first, err := port.Charge(t.Context(), key, chargeReq(provider.MethodCardVisa))
		require.NoError(t, err)

		other := chargeReq(provider.MethodCardVisa)
		other.Amount++
		_, err = port.Charge(t.Context(), key, other)
		require.ErrorIs(t, err, payments.ErrProviderUnknown)
		var refused *provider.APIError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, provider.CodeIdempotencyKeyReused, refused.Code)

		found, err := port.FindCharge(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, first, found, "a lookup settles it with what the provider did")
	})

	t.Run("no such charge", func(t *testing.T) {
		t.Parallel()
		port := newPort(t, 5*time.Second)
		_, err := port.FindCharge(t.Context(), uniqueKey(t))
		require.ErrorIs(t, err, payments.ErrProviderNoSuchCall)
		require.ErrorIs(t, err, provider.ErrNotFound)
	})

	t.Run("provider unreachable", func(t *testing.T) {
		t.Parallel()
		running := startProvider(t, provider.Config{})
		url := running.URL
		require.NoError(t, running.Shutdown(t.Context()))
		port := paymentsport.New(provider.NewClient(url, provider.ClientOptions{Timeout: time.Second}))

		_, err := port.Charge(t.Context(), "k", chargeReq(provider.MethodCardVisa))
		require.ErrorIs(t, err, payments.ErrProviderNotExecuted)
		_, err = port.FindCharge(t.Context(), "k")
		require.ErrorIs(t, err, payments.ErrProviderNotExecuted)
		_, err = port.Refund(t.Context(), "k", payments.RefundRequest{ChargeID: "ch_1", Amount: 1, Reference: "re_1"})
		require.ErrorIs(t, err, payments.ErrProviderNotExecuted)
		_, err = port.FindRefund(t.Context(), "k")
		require.ErrorIs(t, err, payments.ErrProviderNotExecuted)
	})
}

func TestPortRefund(t *testing.T) {
	t.Parallel()
	port := newPort(t, 5*time.Second)
	charge := func(t *testing.T, method string) string {
		t.Helper()
		ch, err := port.Charge(t.Context(), uniqueKey(t), chargeReq(method))
		require.NoError(t, err)
		return ch.ChargeID
	}
	paid := charge(t, provider.MethodCardVisa)
	declined := charge(t, provider.MethodCardDeclined)

	tests := []struct {
		name        string
		chargeID    string
		amount      int64
		succeeded   bool
		hasRefundID bool
	}{
		{"part of a charge", paid, 1000, true, true},
		{"the rest", paid, 1500, true, true},
		{"more than is left: made, failed", paid, 1, false, true},
		{"a declined charge: refused, failed", declined, 1, false, false},
		{"an unknown charge: refused, failed", "ch_nope", 1, false, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := uniqueKey(t)
			ref := fmt.Sprintf("re_%d", i)
			got, err := port.Refund(t.Context(), key, payments.RefundRequest{ChargeID: tt.chargeID, Amount: tt.amount, Reference: ref})
			require.NoError(t, err)
			require.Equal(t, tt.succeeded, got.Succeeded)
			require.Equal(t, tt.hasRefundID, got.RefundID != "", got.RefundID)
			require.Equal(t, ref, got.Reference)
			require.Equal(t, key, got.Key)

			found, err := port.FindRefund(t.Context(), key)
			if !tt.hasRefundID {
				require.ErrorIs(t, err, payments.ErrProviderNoSuchCall, "a refused refund binds nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, got, found)
		})
	}
}

// startProvider serves a mock provider on a loopback port for the test.
func startProvider(t *testing.T, cfg provider.Config) *provider.Running {
	t.Helper()
	running, err := provider.StartInProcess(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = running.Shutdown(context.Background()) })
	return running
}
