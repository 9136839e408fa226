package provider_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/provider"
)

func TestRefund_UpToTheChargeAmount(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{})
	charge, err := client.CreateCharge(t.Context(), "charge-key", provider.ChargeRequest{
		Amount: 1000, Currency: "USD", PaymentMethod: provider.MethodCardVisa, Reference: "pay_r",
	})
	require.NoError(t, err)

	// Each step refunds under its own key; the failed one is a final answer
	// like the others and binds its key.
	steps := []struct {
		key         string
		amount      int64
		status      provider.RefundStatus
		failureCode string
	}{
		{"refund-1", 600, provider.RefundSucceeded, ""},
		{"refund-2", 401, provider.RefundFailed, provider.RefundFailureExceedsCharge},
		{"refund-3", 400, provider.RefundSucceeded, ""},
		{"refund-4", 1, provider.RefundFailed, provider.RefundFailureExceedsCharge},
	}
	for _, step := range steps {
		t.Run(step.key, func(t *testing.T) {
			req := provider.RefundRequest{Charge: charge.ID, Amount: step.amount, Reference: "re_" + step.key}
			refund, err := client.CreateRefund(t.Context(), step.key, req)
			require.NoError(t, err)
			require.Equal(t, step.status, refund.Status)
			require.Equal(t, step.failureCode, refund.FailureCode)
			require.True(t, strings.HasPrefix(refund.ID, "rf_"), refund.ID)
			require.Equal(t, "refund", refund.Object)
			require.Equal(t, charge.ID, refund.Charge)
			require.Equal(t, step.amount, refund.Amount)
			require.Equal(t, "USD", refund.Currency)
			require.Equal(t, step.key, refund.IdempotencyKey)

			replayed, err := client.CreateRefund(t.Context(), step.key, req)
			require.NoError(t, err)
			require.Equal(t, refund, replayed)

			found, err := client.GetRefundByKey(t.Context(), step.key)
			require.NoError(t, err)
			require.Equal(t, refund, found)

			listed, err := client.ListRefundsByReference(t.Context(), "re_"+step.key)
			require.NoError(t, err)
			require.Equal(t, []provider.Refund{refund}, listed)
		})
	}
	require.Len(t, running.Server.Refunds(), len(steps))
}

func TestRefund_ConcurrentRefundsNeverExceedTheCharge(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{})
	charge, err := client.CreateCharge(t.Context(), "charge-key", provider.ChargeRequest{
		Amount: 1000, Currency: "USD", PaymentMethod: provider.MethodCardVisa, Reference: "pay_c",
	})
	require.NoError(t, err)

	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			_, _ = client.CreateRefund(t.Context(), fmt.Sprintf("refund-%d", i),
				provider.RefundRequest{Charge: charge.ID, Amount: 200, Reference: fmt.Sprintf("re_%d", i)})
		})
	}
	wg.Wait()

	succeeded := 0
	for _, refund := range running.Server.Refunds() {
		if refund.Status == provider.RefundSucceeded {
			succeeded++
		}
	}
	require.Equal(t, 5, succeeded)
}

func TestRefund_Refused(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{})
	declined, err := client.CreateCharge(t.Context(), "declined", withMethod(visa("pay_d"), provider.MethodCardDeclined))
	require.NoError(t, err)
	paid, err := client.CreateCharge(t.Context(), "paid", visa("pay_p"))
	require.NoError(t, err)
	_, err = client.CreateRefund(t.Context(), "used", provider.RefundRequest{Charge: paid.ID, Amount: 1, Reference: "re_used"})
	require.NoError(t, err)

	tests := []struct {
		name   string
		key    string
		req    provider.RefundRequest
		status int
		code   string
	}{
		{"unknown charge", "r1", provider.RefundRequest{Charge: "ch_unknown", Amount: 1, Reference: "re_1"}, http.StatusNotFound, provider.CodeNotFound},
		{"declined charge", "r2", provider.RefundRequest{Charge: declined.ID, Amount: 1, Reference: "re_2"}, http.StatusBadRequest, provider.CodeChargeNotRefundable},
		{"zero amount", "r3", provider.RefundRequest{Charge: paid.ID, Amount: 0, Reference: "re_3"}, http.StatusBadRequest, provider.CodeValidationFailed},
		{"no reference", "r4", provider.RefundRequest{Charge: paid.ID, Amount: 1}, http.StatusBadRequest, provider.CodeValidationFailed},
		{"key reused for another amount", "used", provider.RefundRequest{Charge: paid.ID, Amount: 2, Reference: "re_used"}, http.StatusUnprocessableEntity, provider.CodeIdempotencyKeyReused},
		{"charge key reused for a refund", "paid", provider.RefundRequest{Charge: paid.ID, Amount: 1, Reference: "re_5"}, http.StatusUnprocessableEntity, provider.CodeIdempotencyKeyReused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireProblem(t, doRaw(t, http.MethodPost, running.URL+"/v1/refunds", map[string]string{"Idempotency-Key": tt.key}, tt.req),
				tt.status, tt.code)

			_, err := client.CreateRefund(t.Context(), tt.key, tt.req)
			var apiErr *provider.APIError
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, tt.status, apiErr.Status)
			require.Equal(t, tt.code, apiErr.Code)
			require.Equal(t, tt.status == http.StatusNotFound, errors.Is(err, provider.ErrNotFound))
		})
	}

	t.Run("missing key", func(t *testing.T) {
		resp := doRaw(t, http.MethodPost, running.URL+"/v1/refunds", map[string]string{},
			provider.RefundRequest{Charge: paid.ID, Amount: 1, Reference: "re_x"})
		requireProblem(t, resp, http.StatusBadRequest, provider.CodeIdempotencyKeyMissing)
	})
	t.Run("lookups", func(t *testing.T) {
		_, err := client.GetRefundByKey(t.Context(), "r1")
		require.ErrorIs(t, err, provider.ErrNotFound, "a refused refund binds no key")
		resp := doRaw(t, http.MethodGet, running.URL+"/v1/refunds?reference=re_none", nil, nil)
		require.Equal(t, http.StatusOK, resp.status)
		require.JSONEq(t, `{"object": "list", "data": []}`, string(resp.body))
		requireProblem(t, doRaw(t, http.MethodGet, running.URL+"/v1/refunds/rf_nope", nil, nil), http.StatusNotFound, provider.CodeNotFound)
	})
}
