package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/problem"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// fakePayments stands in for payments.Service: each use case is a function
// the test sets, and every call is counted. The database is never faked;
// tests that need one use a real one.
type fakePayments struct {
	pay    func(ctx context.Context, merchantID, orderID string, in payments.PayInput) (payments.Payment, error)
	get    func(merchantID, id string) (payments.Payment, error)
	refund func(ctx context.Context, merchantID, paymentID string, in payments.RefundInput) (payments.Refund, error)
	apply  func(ev payments.ProviderEvent) (payments.EventOutcome, error)

	mu     sync.Mutex
	calls  map[string]int
	events []payments.ProviderEvent
}

func (f *fakePayments) count(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[name]++
}

// Calls returns how often the use case ran.
func (f *fakePayments) Calls(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

// Events returns the events ApplyProviderEvent received, in order.
func (f *fakePayments) Events() []payments.ProviderEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]payments.ProviderEvent(nil), f.events...)
}

func (f *fakePayments) PayOrder(ctx context.Context, _ *idempotency.Op, merchantID, orderID string, in payments.PayInput) (payments.Payment, error) {
	f.count("pay")
	return f.pay(ctx, merchantID, orderID, in)
}

func (f *fakePayments) GetPayment(_ context.Context, merchantID, id string) (payments.Payment, error) {
	f.count("get")
	return f.get(merchantID, id)
}

func (f *fakePayments) RefundPayment(ctx context.Context, _ *idempotency.Op, merchantID, paymentID string, in payments.RefundInput) (payments.Refund, error) {
	f.count("refund")
	return f.refund(ctx, merchantID, paymentID, in)
}

func (f *fakePayments) GetRefund(_ context.Context, merchantID, id string) (payments.Refund, error) {
	f.count("get_refund")
	return payments.Refund{}, payments.ErrNotFound
}

func (f *fakePayments) ApplyProviderEvent(_ context.Context, ev payments.ProviderEvent) (payments.EventOutcome, error) {
	f.count("apply")
	f.mu.Lock()
	f.events = append(f.events, ev)
	f.mu.Unlock()
	if f.apply == nil {
		return payments.EventApplied, nil
	}
	return f.apply(ev)
}

// noOrders is an OrderService for tests that never reach the order routes.
type noOrders struct{ handlers.OrderService }

const webhookSecret = "whsec_handlers_test"

// paymentsRouter serves the real router with svc behind the payment routes.
// guarded stands in for Deps.Guarded (passThrough when nil), and
// auth for Deps.Auth (acme only when nil).
func paymentsRouter(t *testing.T, svc handlers.PaymentService, guarded func(ginidem.GuardedHandler) gin.HandlerFunc, auth handlers.Authenticator) *gin.Engine {
	t.Helper()
	if guarded == nil {
		guarded = passThroughGuarded
	}
	if auth == nil {
		auth = authFunc(func(_ context.Context, key string) (string, error) {
			if key == acmeKey {
				return "mer_acme", nil
			}
			return "", merchants.ErrUnauthorized
		})
	}
	return handlers.NewRouter(handlers.Deps{
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Auth:     auth,
		Orders:   noOrders{},
		Payments: svc,
		Atomic:   passThrough,
		Guarded:  guarded,
		VerifyWebhook: func(header string, body []byte) error {
			return provider.VerifySignature(webhookSecret, header, body, time.Now(), 0)
		},
		Database:     handlers.PingerFunc(func(context.Context) error { return nil }),
		MaxBodyBytes: maxBody,
	})
}

// send serves one request; header holds name, value pairs.
func send(r http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json") // header may say otherwise
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w
}

var created = time.Date(2025, 6, 1, 12, 0, 0, 123456000, time.UTC)

func TestPaymentErrorRows(t *testing.T) {
	tests := []struct {
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{fmt.Errorf("pay: %w", payments.ErrOrderAlreadyPaid), 409, "order_already_paid", ""},
		{fmt.Errorf("refund: %w", payments.ErrRefundExceedsPayment), 409, "refund_exceeds_payment", ""},
		{fmt.Errorf("pay: %w", payments.ErrProviderUnavailable), 502, "provider_unavailable", ""},
		{fmt.Errorf("checkpoint: %w", idempotency.ErrFenced), 409, "idempotency_request_in_progress", "1"},
		{fmt.Errorf("mail receipt: %w", idempotency.ErrNotExecuted), 502, "provider_unavailable", ""},
		{fmt.Errorf("lock order: %w", database.ErrBusy), 503, "service_unavailable", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodPost, "/v1/orders/ord_1/payments", nil)
			handlers.RenderError(c, tt.err)
			requireProblem(t, w, tt.status, tt.code)
			require.Equal(t, tt.retryAfter, w.Header().Get("Retry-After"))
		})
	}
}

func TestPaymentRoutesWithoutIdempotency(t *testing.T) {
	svc := &fakePayments{
		get: func(merchantID, id string) (payments.Payment, error) {
			if merchantID == "mer_acme" && id == "pay_1" {
				return payments.Payment{ID: "pay_1", MerchantID: merchantID, OrderID: "ord_1", Amount: 2500, Currency: "BRL",
					PaymentMethod: "pm_card_visa", Status: payments.StatusPending, CreatedAt: created}, nil
			}
			return payments.Payment{}, fmt.Errorf("get payment %s: %w", id, payments.ErrNotFound)
		},
	}
	r := paymentsRouter(t, svc, nil, nil)
	auth := []string{"Authorization", "Bearer " + acmeKey}

	t.Run("get shows pending as processing", func(t *testing.T) {
		w := send(r, http.MethodGet, "/v1/payments/pay_1", "", auth...)
		require.Equal(t, http.StatusOK, w.Code)
		require.Equal(t, "application/json", w.Header().Get("Content-Type"))
		var got answers.PaymentResponse
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
		require.Equal(t, "processing", got.Status)
		require.Nil(t, got.ProviderChargeID)
		require.Nil(t, got.DeclineCode)
	})
	t.Run("get unknown", func(t *testing.T) {
		requireProblem(t, send(r, http.MethodGet, "/v1/payments/pay_2", "", auth...), http.StatusNotFound, "not_found")
	})
	t.Run("every route needs the API key", func(t *testing.T) {
		requireProblem(t, send(r, http.MethodGet, "/v1/payments/pay_1", ""), http.StatusUnauthorized, "unauthorized")
		requireProblem(t, send(r, http.MethodPost, "/v1/orders/ord_1/payments", `{"payment_method":"pm_card_visa"}`), http.StatusUnauthorized, "unauthorized")
		requireProblem(t, send(r, http.MethodPost, "/v1/payments/pay_1/refunds", `{}`), http.StatusUnauthorized, "unauthorized")
	})

	invalid := []struct {
		name, path, body string
		fields           []problem.FieldError
	}{
		{"pay: unknown field", "/v1/orders/ord_1/payments", `{"payment_method":"pm_card_visa","amount":1}`,
			[]problem.FieldError{{Field: "amount", Message: "is not a known field"}}},
		{"pay: wrong type", "/v1/orders/ord_1/payments", `{"payment_method":7}`,
			[]problem.FieldError{{Field: "payment_method", Message: "must be a string"}}},
		{"refund: not a whole number", "/v1/payments/pay_1/refunds", `{"amount":10.5}`,
			[]problem.FieldError{{Field: "amount", Message: "must be a whole number"}}},
		{"refund: wrong type", "/v1/payments/pay_1/refunds", `{"amount":"10"}`,
			[]problem.FieldError{{Field: "amount", Message: "must be an integer"}}},
		{"refund: malformed", "/v1/payments/pay_1/refunds", `{"amount":`, nil},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			p := requireProblem(t, send(r, http.MethodPost, tt.path, tt.body, auth...), http.StatusBadRequest, "validation_failed")
			require.Equal(t, tt.fields, p.Errors)
		})
	}

	require.Zero(t, svc.Calls("pay")+svc.Calls("refund"))
}

func TestRouterRequiresThePaymentDeps(t *testing.T) {
	base := handlers.Deps{
		Auth: authFunc(nil), Orders: noOrders{}, Atomic: passThrough,
		Database: handlers.PingerFunc(func(context.Context) error { return nil }),
		Payments: &fakePayments{},
	}
	noGuard := base
	noGuard.VerifyWebhook = func(string, []byte) error { return nil }
	require.PanicsWithValue(t, "handlers: Deps.Guarded is required with Deps.Payments", func() { handlers.NewRouter(noGuard) })
	noVerify := base
	noVerify.Guarded = passThroughGuarded
	require.PanicsWithValue(t, "handlers: Deps.VerifyWebhook is required with Deps.Payments", func() { handlers.NewRouter(noVerify) })
}

// TestPaymentsBehindTheKeeper runs the payment routes behind the real
// idempotency Keeper over a real database, with the service faked: what is
// stored, what is replayed byte for byte, and what is never stored.
func TestPaymentsBehindTheKeeper(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, d)
			ms := merchants.NewStore(db.DB, nil)
			require.NoError(t, ms.SeedDemo(t.Context()))
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			_, idem, _ := newIdempotency(t, db.DB, idempotency.Config{
				TTL: time.Hour, LockTimeout: time.Minute, Wait: 500 * time.Millisecond, MaxBodyBytes: maxBody,
			}, log)

			// The fake pays by method, like the mock provider; every payment
			// gets an id of its own. (Resuming a payment on a retry is the
			// service's work, proven in the payments package.)
			var mu sync.Mutex
			seq := 0
			svc := &fakePayments{}
			svc.pay = func(ctx context.Context, merchant, orderID string, in payments.PayInput) (payments.Payment, error) {
				mu.Lock()
				seq++
				id := fmt.Sprintf("pay_%d", seq)
				mu.Unlock()
				p := payments.Payment{ID: id, MerchantID: merchant, OrderID: orderID, Amount: 2500, Currency: "BRL",
					PaymentMethod: in.PaymentMethod, CreatedAt: created, Status: payments.StatusSucceeded, ProviderChargeID: "ch_" + id}
				switch in.PaymentMethod {
				case "pm_card_declined":
					p.Status, p.DeclineCode = payments.StatusFailed, "card_declined" // a result, not an error
				case "pm_fault_lost_response":
					p.Status, p.ProviderChargeID = payments.StatusProcessing, ""
				case "pm_fault_unavailable":
					return payments.Payment{}, fmt.Errorf("charge %s: %w", id, payments.ErrProviderUnavailable)
				case "pm_paid":
					return payments.Payment{}, fmt.Errorf("order %s: %w", orderID, payments.ErrOrderAlreadyPaid)
				}
				return p, nil
			}
			svc.refund = func(ctx context.Context, merchant, paymentID string, in payments.RefundInput) (payments.Refund, error) {
				if in.Amount != nil && *in.Amount > 2500 {
					return payments.Refund{}, fmt.Errorf("refund: %w", payments.ErrRefundExceedsPayment)
				}
				r := payments.Refund{ID: "re_1", MerchantID: merchant, PaymentID: "pay_1", Amount: 1000, Currency: "BRL",
					Status: payments.StatusSucceeded, CreatedAt: created}
				if in.Amount != nil && *in.Amount == 13 {
					r.Status = payments.StatusProcessing
				}
				return r, nil
			}
			r := paymentsRouter(t, svc, idem.Guarded, ms)

			post := func(path, key, body string) *httptest.ResponseRecorder {
				return send(r, http.MethodPost, path, body, "Authorization", "Bearer "+acmeKey, "Idempotency-Key", key)
			}
			// sendTwice sends the request twice under one key and returns both
			// answers.
			sendTwice := func(path, key, body string) (first, second *httptest.ResponseRecorder) {
				return post(path, key, body), post(path, key, body)
			}
			requireReplay := func(t *testing.T, first, second *httptest.ResponseRecorder) {
				t.Helper()
				require.Empty(t, first.Header().Get(ginidem.HeaderReplayed))
				require.Equal(t, "true", second.Header().Get(ginidem.HeaderReplayed))
				require.Equal(t, first.Code, second.Code)
				require.Equal(t, first.Body.String(), second.Body.String())
				require.Equal(t, first.Header().Get("Content-Type"), second.Header().Get("Content-Type"))
				require.Equal(t, first.Header().Get("Location"), second.Header().Get("Location"))
			}

			t.Run("succeeded: 201, stored, replayed", func(t *testing.T) {
				before := svc.Calls("pay")
				first, second := sendTwice("/v1/orders/ord_1/payments", "k-visa", `{"payment_method":"pm_card_visa"}`)
				require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
				var p answers.PaymentResponse
				require.NoError(t, json.Unmarshal(first.Body.Bytes(), &p))
				require.Equal(t, "succeeded", p.Status)
				require.Equal(t, "/v1/payments/"+p.ID, first.Header().Get("Location"))
				require.Equal(t, "application/json", first.Header().Get("Content-Type"))
				requireReplay(t, first, second)
				require.Equal(t, before+1, svc.Calls("pay"))
			})

			t.Run("declined: 402 with payment_id, stored, replayed", func(t *testing.T) {
				before := svc.Calls("pay")
				first, second := sendTwice("/v1/orders/ord_2/payments", "k-declined", `{"payment_method":"pm_card_declined"}`)
				p := requireProblem(t, first, http.StatusPaymentRequired, "payment_declined")
				require.Equal(t, "card_declined", p.Extra["decline_code"])
				require.Contains(t, p.Extra["payment_id"], "pay_")
				requireReplay(t, first, second)
				require.Equal(t, before+1, svc.Calls("pay"))
			})

			t.Run("order already paid: 409, stored, replayed", func(t *testing.T) {
				first, second := sendTwice("/v1/orders/ord_3/payments", "k-paid", `{"payment_method":"pm_paid"}`)
				requireProblem(t, first, http.StatusConflict, "order_already_paid")
				requireReplay(t, first, second)
			})

			t.Run("provider unavailable: 502, not stored, the key runs again", func(t *testing.T) {
				before := svc.Calls("pay")
				first, second := sendTwice("/v1/orders/ord_4/payments", "k-unavailable", `{"payment_method":"pm_fault_unavailable"}`)
				requireProblem(t, first, http.StatusBadGateway, "provider_unavailable")
				requireProblem(t, second, http.StatusBadGateway, "provider_unavailable")
				require.Empty(t, second.Header().Get(ginidem.HeaderReplayed))
				require.Equal(t, before+2, svc.Calls("pay"))
			})

			t.Run("unknown outcome: 202, never stored, the key runs again", func(t *testing.T) {
				// Storing the final answer once the outcome is learned is the
				// core's settle step: see TestSettledPaymentStoresItsAnswerWithIt
				// (internal/app) and the Effect tests (gormstore).
				const key = "k-lost"
				body := `{"payment_method":"pm_fault_lost_response"}`
				before := svc.Calls("pay")
				first, second := sendTwice("/v1/orders/ord_5/payments", key, body)
				for _, w := range []*httptest.ResponseRecorder{first, second} {
					require.Equal(t, http.StatusAccepted, w.Code, w.Body.String())
					require.Empty(t, w.Header().Get(ginidem.HeaderReplayed), "a 202 is never stored")
				}
				require.Equal(t, before+2, svc.Calls("pay"))
				var pending answers.PaymentResponse
				require.NoError(t, json.Unmarshal(second.Body.Bytes(), &pending))
				require.Equal(t, "processing", pending.Status)
				require.Equal(t, "/v1/payments/"+pending.ID, second.Header().Get("Location"))
			})

			t.Run("refunds", func(t *testing.T) {
				first, second := sendTwice("/v1/payments/pay_1/refunds", "k-refund", ``)
				require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
				require.Empty(t, first.Header().Get("Location"))
				requireReplay(t, first, second)

				exceeds1, exceeds2 := sendTwice("/v1/payments/pay_1/refunds", "k-refund-big", `{"amount":2501}`)
				requireProblem(t, exceeds1, http.StatusConflict, "refund_exceeds_payment")
				requireReplay(t, exceeds1, exceeds2)

				unknown := post("/v1/payments/pay_1/refunds", "k-refund-unknown", `{"amount":13}`)
				require.Equal(t, http.StatusAccepted, unknown.Code)
				require.Contains(t, unknown.Body.String(), `"status":"processing"`)
			})
		})
	}
}
