package answers_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/problem"
)

var created = time.Date(2025, 6, 1, 12, 0, 0, 123456000, time.UTC)

func payment(status payments.Status) payments.Payment {
	p := payments.Payment{
		ID: "pay_1", MerchantID: "mer_acme", OrderID: "ord_1", Amount: 2500, Currency: "BRL",
		PaymentMethod: "pm_card_visa", Status: status, IdempotencyKey: "key-1",
		CreatedAt: created.In(time.FixedZone("BRT", -3*3600)), // shown in UTC whatever it is read in
	}
	switch status {
	case payments.StatusSucceeded:
		p.ProviderChargeID, p.AmountRefunded = "ch_1", 1000
	case payments.StatusFailed:
		p.ProviderChargeID, p.DeclineCode, p.PaymentMethod = "ch_1", "card_declined", "pm_card_declined"
	}
	return p
}

func refund(status payments.Status) payments.Refund {
	return payments.Refund{
		ID: "re_1", MerchantID: "mer_acme", PaymentID: "pay_1", Amount: 1000, Currency: "BRL",
		Status: status, IdempotencyKey: "key-2", CreatedAt: created,
	}
}

func TestPayment(t *testing.T) {
	paymentJSON := func(status, chargeID, declineCode string, refunded int, method string) string {
		return fmt.Sprintf(`{"id":"pay_1","object":"payment","order_id":"ord_1","amount":2500,"currency":"BRL",`+
			`"status":%q,"payment_method":%q,"provider_charge_id":%s,"decline_code":%s,"amount_refunded":%d,`+
			`"created_at":"2025-06-01T12:00:00.123456Z"}`, status, method, chargeID, declineCode, refunded)
	}
	tests := []struct {
		status      payments.Status
		code        int
		contentType string
		location    string
		body        string
	}{
		{payments.StatusSucceeded, 201, "application/json", "/v1/payments/pay_1", paymentJSON("succeeded", `"ch_1"`, "null", 1000, "pm_card_visa")},
		{payments.StatusProcessing, 202, "application/json", "/v1/payments/pay_1", paymentJSON("processing", "null", "null", 0, "pm_card_visa")},
		{payments.StatusPending, 202, "application/json", "/v1/payments/pay_1", paymentJSON("processing", "null", "null", 0, "pm_card_visa")},
		{payments.StatusFailed, 402, problem.ContentType, "", `{"type":"https://errors.idempotent-payments.dev/payment_declined",` +
			`"title":"Payment declined","status":402,"detail":"The provider declined the payment (card_declined). ` +
			`The order is still pending payment: try again with another payment method and a new Idempotency-Key.",` +
			`"code":"payment_declined","decline_code":"card_declined","payment_id":"pay_1"}`},
		{payments.StatusCanceled, 409, problem.ContentType, "", `{"type":"https://errors.idempotent-payments.dev/payment_canceled",` +
			`"title":"Payment canceled","status":409,"detail":"This payment never reached the provider and was abandoned, ` +
			`so it was canceled; nothing was charged. The order is payable again: pay it with a new Idempotency-Key.",` +
			`"code":"payment_canceled","payment_id":"pay_1"}`},
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			got := answers.Payment(payment(tt.status))
			require.Equal(t, tt.code, got.Status)
			require.Equal(t, tt.contentType, got.Header.Get("Content-Type"))
			require.Equal(t, tt.location, got.Header.Get("Location"))
			require.Equal(t, tt.body, string(got.Body), "the exact bytes: a replay must be byte-identical")
			require.Equal(t, tt.code != 202, got.Final, "final but a 202, whose outcome is not known yet")
			require.Equal(t, got, answers.Payment(payment(tt.status)), "a pure function of the payment")
		})
	}
}

func TestRefund(t *testing.T) {
	refundJSON := func(status string) string {
		return fmt.Sprintf(`{"id":"re_1","object":"refund","payment_id":"pay_1","amount":1000,"currency":"BRL",`+
			`"status":%q,"created_at":"2025-06-01T12:00:00.123456Z"}`, status)
	}
	tests := []struct {
		status      payments.Status
		code        int
		contentType string
		body        string
	}{
		{payments.StatusSucceeded, 201, "application/json", refundJSON("succeeded")},
		{payments.StatusFailed, 201, "application/json", refundJSON("failed")},
		{payments.StatusProcessing, 202, "application/json", refundJSON("processing")},
		{payments.StatusPending, 202, "application/json", refundJSON("processing")},
		{payments.StatusCanceled, 409, problem.ContentType, `{"type":"https://errors.idempotent-payments.dev/refund_canceled",` +
			`"title":"Refund canceled","status":409,"detail":"This refund never reached the provider and was abandoned, ` +
			`so it was canceled; nothing was refunded and its amount is free again. To refund, send a new request with a new ` +
			`Idempotency-Key.","code":"refund_canceled","refund_id":"re_1"}`},
	}
	for _, tt := range tests {
		t.Run(string(tt.status), func(t *testing.T) {
			got := answers.Refund(refund(tt.status))
			require.Equal(t, idempotency.Answer{Status: tt.code, Header: http.Header{"Content-Type": {tt.contentType}},
				Body: []byte(tt.body), Final: tt.code != 202}, got, "no Location: refunds have no route of their own")
		})
	}
}
