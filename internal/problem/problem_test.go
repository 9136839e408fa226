package problem_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/problem"
)

func TestMarshalJSON(t *testing.T) {
	tests := []struct {
		name string
		p    problem.Problem
		want string
	}{
		{
			name: "standard members only",
			p:    problem.New(404, problem.CodeNotFound, "Not found", "No such order."),
			want: `{"type":"https://errors.idempotent-payments.dev/not_found","title":"Not found","status":404,"detail":"No such order.","code":"not_found"}`,
		},
		{
			name: "field errors",
			p: func() problem.Problem {
				p := problem.New(400, problem.CodeValidationFailed, "Validation failed", "1 field.")
				p.Errors = []problem.FieldError{{Field: "items[0].quantity", Message: "must be between 1 and 10000"}}
				return p
			}(),
			want: `{"type":"https://errors.idempotent-payments.dev/validation_failed","title":"Validation failed","status":400,"detail":"1 field.","code":"validation_failed","errors":[{"field":"items[0].quantity","message":"must be between 1 and 10000"}]}`,
		},
		{
			name: "extension members at the top level, sorted, never over a standard one",
			p: func() problem.Problem {
				p := problem.New(402, problem.CodePaymentDeclined, "Payment declined", "Declined.")
				p.Extra = map[string]any{"payment_id": "pay_1", "decline_code": "card_declined", "status": 200, "code": "x"}
				return p
			}(),
			want: `{"type":"https://errors.idempotent-payments.dev/payment_declined","title":"Payment declined","status":402,"detail":"Declined.","code":"payment_declined","decline_code":"card_declined","payment_id":"pay_1"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.p)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))

			var back problem.Problem
			require.NoError(t, json.Unmarshal(got, &back))
			again, err := json.Marshal(back)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(again), "a problem survives a round trip")
		})
	}
}

func TestEncode(t *testing.T) {
	require.JSONEq(t, `{"type":"https://errors.idempotent-payments.dev/service_unavailable","title":"Service unavailable","status":503,"detail":"Later.","code":"service_unavailable"}`,
		string(problem.Encode(problem.New(503, problem.CodeServiceUnavailable, "Service unavailable", "Later."))))

	// An extension member that cannot be encoded costs itself, not the answer.
	p := problem.New(500, problem.CodeInternalError, "Internal error", "Oops.")
	p.Extra = map[string]any{"bad": make(chan int)}
	require.JSONEq(t, `{"type":"https://errors.idempotent-payments.dev/internal_error","title":"Internal error","status":500,"detail":"Oops.","code":"internal_error"}`,
		string(problem.Encode(p)))
}
