package handlers

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
)

// fakeRecords records what the finisher asks of the Keeper and answers err.
type fakeRecords struct {
	err   error
	calls []finishCall
}

type finishCall struct {
	merchantID, key, resourceID string
	resp                        idempotency.Response
}

func (f *fakeRecords) Finish(_ context.Context, merchantID, key, resourceID string, resp idempotency.Response) error {
	f.calls = append(f.calls, finishCall{merchantID, key, resourceID, resp})
	return f.err
}

func TestRecordFinisher(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	pay := func(s payments.Status) payments.Payment {
		return payments.Payment{ID: "pay_1", MerchantID: "mer_1", OrderID: "ord_1", Amount: 2500, Currency: "BRL",
			Status: s, DeclineCode: "card_declined", IdempotencyKey: "client-key-that-must-not-be-logged", CreatedAt: at}
	}
	ref := func(s payments.Status) payments.Refund {
		return payments.Refund{ID: "re_1", MerchantID: "mer_1", PaymentID: "pay_1", Amount: 100, Currency: "BRL",
			Status: s, IdempotencyKey: "client-key-that-must-not-be-logged", CreatedAt: at}
	}
	tests := []struct {
		name     string
		resolve  func(f *RecordFinisher)
		err      error
		want     []finishCall
		logLevel string // the level of the line logged, "" for none
	}{
		{name: "a succeeded payment stores its 201",
			resolve:  func(f *RecordFinisher) { f.PaymentResolved(t.Context(), pay(payments.StatusSucceeded)) },
			want:     []finishCall{{"mer_1", "client-key-that-must-not-be-logged", "pay_1", PaymentAnswer(pay(payments.StatusSucceeded))}},
			logLevel: "INFO"},
		{name: "a failed payment stores its 402",
			resolve:  func(f *RecordFinisher) { f.PaymentResolved(t.Context(), pay(payments.StatusFailed)) },
			want:     []finishCall{{"mer_1", "client-key-that-must-not-be-logged", "pay_1", PaymentAnswer(pay(payments.StatusFailed))}},
			logLevel: "INFO"},
		{name: "a final refund stores its 201",
			resolve:  func(f *RecordFinisher) { f.RefundResolved(t.Context(), ref(payments.StatusFailed)) },
			want:     []finishCall{{"mer_1", "client-key-that-must-not-be-logged", "re_1", RefundAnswer(ref(payments.StatusFailed))}},
			logLevel: "INFO"},
		{name: "a processing payment is left open",
			resolve:  func(f *RecordFinisher) { f.PaymentResolved(t.Context(), pay(payments.StatusProcessing)) },
			logLevel: "WARN"},
		{name: "a pending refund is left open",
			resolve:  func(f *RecordFinisher) { f.RefundResolved(t.Context(), ref(payments.StatusPending)) },
			logLevel: "WARN"},
		{name: "no open record is normal",
			resolve:  func(f *RecordFinisher) { f.PaymentResolved(t.Context(), pay(payments.StatusSucceeded)) },
			err:      idempotency.ErrNotFound,
			want:     []finishCall{{"mer_1", "client-key-that-must-not-be-logged", "pay_1", PaymentAnswer(pay(payments.StatusSucceeded))}},
			logLevel: "DEBUG"},
		{name: "a locked record is normal",
			resolve:  func(f *RecordFinisher) { f.RefundResolved(t.Context(), ref(payments.StatusSucceeded)) },
			err:      idempotency.ErrLocked,
			want:     []finishCall{{"mer_1", "client-key-that-must-not-be-logged", "re_1", RefundAnswer(ref(payments.StatusSucceeded))}},
			logLevel: "DEBUG"},
		{name: "another error is a warning",
			resolve:  func(f *RecordFinisher) { f.PaymentResolved(t.Context(), pay(payments.StatusSucceeded)) },
			err:      errors.New("connection reset"),
			want:     []finishCall{{"mer_1", "client-key-that-must-not-be-logged", "pay_1", PaymentAnswer(pay(payments.StatusSucceeded))}},
			logLevel: "WARN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			records := &fakeRecords{err: tt.err}
			f := &RecordFinisher{records: records, log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}

			tt.resolve(f)

			require.Equal(t, tt.want, records.calls)
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			require.Len(t, lines, 1, logs.String())
			require.Contains(t, lines[0], "level="+tt.logLevel)
			require.NotContains(t, logs.String(), "client-key", "an idempotency key never reaches the logs")
		})
	}

	require.Panics(t, func() { NewRecordFinisher(nil, nil) }, "a missing keeper stops the process at start")
}
