package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/client"
)

// seen is one request as the scripted server received it.
type seen struct {
	Method, Path, Key, Auth, Body string
}

// script is an API that answers each request with the next of its steps (the
// last one repeats) and records what it received.
type script struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	steps []http.HandlerFunc
	got   []seen
}

func newScript(t *testing.T, steps ...http.HandlerFunc) *script {
	t.Helper()
	s := &script{t: t, steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got = append(s.got, seen{r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization"), string(b)})
		step := s.steps[min(len(s.got), len(s.steps))-1]
		s.mu.Unlock()
		step(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *script) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.got...)
}

// answer writes status with a JSON body and the given header pairs.
func answer(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		ct := "application/json"
		if status >= 400 {
			ct = "application/problem+json"
		}
		w.Header().Set("Content-Type", ct)
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// problem answers an RFC 9457 body with the given code.
func problem(status int, code string, header ...string) http.HandlerFunc {
	return answer(status, fmt.Sprintf(`{"type":"https://errors.idempotent-payments.dev/%s","title":"T","status":%d,"detail":"D","code":%q}`,
		code, status, code), header...)
}

// dropConnection closes the connection without an answer: for the client,
// a lost answer (the request may have been served).
func dropConnection(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// hang holds the request until the client gives up on it.
func hang(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

const (
	orderJSON      = `{"id":"ord_1","object":"order","customer_id":"cus_1","currency":"BRL","items":[{"sku":"SKU-1","name":"Coffee","quantity":2,"unit_amount":1250}],"amount_total":2500,"status":"pending_payment","metadata":{},"shipping_address":null,"version":1,"created_at":"2025-06-01T12:00:00Z"}`
	processingJSON = `{"id":"pay_1","object":"payment","order_id":"ord_1","amount":2500,"currency":"BRL","status":"processing","payment_method":"pm_card_visa","provider_charge_id":null,"decline_code":null,"amount_refunded":0,"created_at":"2025-06-01T12:00:00Z"}`
	succeededJSON  = `{"id":"pay_1","object":"payment","order_id":"ord_1","amount":2500,"currency":"BRL","status":"succeeded","payment_method":"pm_card_visa","provider_charge_id":"ch_1","decline_code":null,"amount_refunded":0,"created_at":"2025-06-01T12:00:00Z"}`
)

var orderParams = client.CreateOrderParams{
	CustomerID: "cus_1", Currency: "BRL",
	Items: []client.OrderItem{{SKU: "SKU-1", Name: "Coffee", Quantity: 2, UnitAmount: 1250}},
}

// sleeper records the waits the client asks for and spends none of them.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeper) recorded() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// newClient returns a client of s that records its waits instead of
// sleeping them.
func newClient(s *script, opts ...client.Option) (*client.Client, *sleeper) {
	sl := &sleeper{}
	opts = append([]client.Option{client.WithSleep(sl.sleep), client.WithRand(mathrand.New(mathrand.NewPCG(1, 2)))}, opts...)
	return client.New(s.srv.URL, "sk_test_acme", opts...), sl
}

func TestOneKeyForEveryAttemptOfACall(t *testing.T) {
	s := newScript(t,
		dropConnection,
		problem(503, "service_unavailable", "Retry-After", "1"),
		problem(409, "idempotency_request_in_progress", "Retry-After", "2"),
		problem(502, "provider_unavailable"),
		answer(201, orderJSON, "Idempotent-Replayed", "true"),
	)
	c, _ := newClient(s)

	order, err := c.CreateOrder(context.Background(), orderParams)
	require.NoError(t, err)
	require.Equal(t, "ord_1", order.ID)
	require.EqualValues(t, 2500, order.AmountTotal)
	require.True(t, order.Replayed)
	require.Equal(t, 5, order.Attempts)

	got := s.requests()
	require.Len(t, got, 5)
	require.NotEmpty(t, got[0].Key)
	require.Equal(t, order.IdempotencyKey, got[0].Key)
	for _, r := range got {
		require.Equal(t, got[0].Key, r.Key, "every attempt carries the key of the first")
		require.Equal(t, got[0].Body, r.Body, "every attempt sends the same bytes")
		require.Equal(t, "POST", r.Method)
		require.Equal(t, "/v1/orders", r.Path)
		require.Equal(t, "Bearer sk_test_acme", r.Auth)
	}

	// A second call is a second operation: a key of its own.
	second, err := c.CreateOrder(context.Background(), orderParams)
	require.NoError(t, err)
	require.NotEqual(t, order.IdempotencyKey, second.IdempotencyKey)
	require.Equal(t, second.IdempotencyKey, s.requests()[5].Key)

	// A key given by the caller is the one sent, on every attempt.
	s2 := newScript(t, dropConnection, answer(201, orderJSON))
	c2, _ := newClient(s2)
	order, err = c2.CreateOrder(context.Background(), orderParams, client.WithIdempotencyKey("checkout-42"))
	require.NoError(t, err)
	require.Equal(t, "checkout-42", order.IdempotencyKey)
	for _, r := range s2.requests() {
		require.Equal(t, "checkout-42", r.Key)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	s := newScript(t,
		problem(429, "rate_limited", "Retry-After", "3"),
		problem(409, "idempotency_request_in_progress", "Retry-After", "2"),
		problem(503, "service_unavailable", "Retry-After", "7"),
		answer(201, orderJSON),
	)
	c, sl := newClient(s, client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	_, err := c.CreateOrder(context.Background(), orderParams)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{3 * time.Second, 2 * time.Second, 7 * time.Second}, sl.recorded(),
		"Retry-After replaces the backoff, even above its maximum")
}

func TestBackoffIsExponentialWithFullJitter(t *testing.T) {
	const attempts = 8
	base, ceiling := 100*time.Millisecond, time.Second
	s := newScript(t, problem(503, "service_unavailable"))
	c, sl := newClient(s, client.WithMaxAttempts(attempts), client.WithBackoff(base, ceiling))
	_, err := c.CreateOrder(context.Background(), orderParams)
	require.ErrorIs(t, err, client.ErrServiceUnavailable)
	require.Len(t, s.requests(), attempts)

	waits := sl.recorded()
	require.Len(t, waits, attempts-1, "no wait after the last attempt")
	var distinct = map[time.Duration]bool{}
	for i, w := range waits {
		limit := min(ceiling, base<<i)
		require.GreaterOrEqual(t, w, time.Duration(0))
		require.Less(t, w, limit, "wait %d is within [0, min(max, base·2^%d))", i+1, i)
		distinct[w] = true
	}
	require.Greater(t, len(distinct), 1, "jittered, not fixed")

	// The same seed gives the same waits.
	s2 := newScript(t, problem(503, "service_unavailable"))
	c2, sl2 := newClient(s2, client.WithMaxAttempts(attempts), client.WithBackoff(base, ceiling))
	_, _ = c2.CreateOrder(context.Background(), orderParams)
	require.Equal(t, waits, sl2.recorded())
}

func TestFinalAnswersAreNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name     string
		step     http.HandlerFunc
		sentinel error
		check    func(t *testing.T, e *client.APIError)
	}{
		{"422 key reused", problem(422, "idempotency_key_reused"), client.ErrKeyReused, nil},
		{"400 validation", answer(400, `{"type":"t","title":"Validation failed","status":400,"detail":"The request has 1 invalid field.","code":"validation_failed","errors":[{"field":"currency","message":"must be an ISO 4217 code"}]}`),
			client.ErrValidation, func(t *testing.T, e *client.APIError) {
				require.Equal(t, []client.FieldError{{Field: "currency", Message: "must be an ISO 4217 code"}}, e.Fields)
			}},
		{"402 declined", answer(402, `{"type":"t","title":"Payment declined","status":402,"detail":"D","code":"payment_declined","decline_code":"card_declined","payment_id":"pay_9"}`, "Idempotent-Replayed", "true"),
			client.ErrPaymentDeclined, func(t *testing.T, e *client.APIError) {
				require.Equal(t, "pay_9", e.PaymentID)
				require.Equal(t, "card_declined", e.DeclineCode)
				require.True(t, e.Replayed)
			}},
		{"409 order already paid", problem(409, "order_already_paid"), client.ErrOrderAlreadyPaid, nil},
		{"409 payment canceled: final, pay again with a new key", answer(409, `{"type":"t","title":"Payment canceled","status":409,"detail":"D","code":"payment_canceled","payment_id":"pay_7"}`, "Idempotent-Replayed", "true"),
			client.ErrPaymentCanceled, func(t *testing.T, e *client.APIError) {
				require.Equal(t, "pay_7", e.PaymentID)
				require.True(t, e.Replayed)
				require.False(t, e.Retryable())
			}},
		{"404", problem(404, "not_found"), client.ErrNotFound, nil},
		{"401", problem(401, "unauthorized"), client.ErrUnauthorized, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, tc.step, answer(201, succeededJSON))
			c, sl := newClient(s)
			p, err := c.PayOrder(context.Background(), "ord_1", client.PayParams{PaymentMethod: "pm_card_visa"})
			require.Nil(t, p)
			require.ErrorIs(t, err, tc.sentinel)
			var apiErr *client.APIError
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, s.requests()[0].Key, apiErr.IdempotencyKey)
			require.NotContains(t, err.Error(), apiErr.IdempotencyKey, "an error message never holds the key")
			require.NotErrorIs(t, err, client.ErrInProgress)
			if tc.check != nil {
				tc.check(t, apiErr)
			}
			require.Len(t, s.requests(), 1, "a final answer is not retried")
			require.Empty(t, sl.recorded())
		})
	}
}

func TestAcceptedThenCreated(t *testing.T) {
	s := newScript(t,
		answer(202, processingJSON, "Location", "/v1/payments/pay_1"),
		answer(202, processingJSON, "Idempotent-Replayed", "true"),
		answer(201, succeededJSON, "Idempotent-Replayed", "true"),
	)
	var attempts []client.Attempt
	c, sl := newClient(s, client.WithOnAttempt(func(a client.Attempt) { attempts = append(attempts, a) }))
	p, err := c.PayOrder(context.Background(), "ord_1", client.PayParams{PaymentMethod: "pm_card_visa"})
	require.NoError(t, err, "a 202 is not an error")
	require.Equal(t, client.StatusSucceeded, p.Status)
	require.Equal(t, "ch_1", p.ProviderChargeID)
	require.True(t, p.Replayed)
	require.Equal(t, 3, p.Attempts)
	require.Len(t, sl.recorded(), 2, "a backoff between the 202s")

	got := s.requests()
	require.Len(t, got, 3)
	for _, r := range got {
		require.Equal(t, "/v1/orders/ord_1/payments", r.Path)
		require.Equal(t, got[0].Key, r.Key)
		require.JSONEq(t, `{"payment_method":"pm_card_visa"}`, r.Body)
	}
	require.Len(t, attempts, 3)
	require.Equal(t, []int{202, 202, 201}, []int{attempts[0].Status, attempts[1].Status, attempts[2].Status})
	require.True(t, attempts[0].Retry)
	require.NoError(t, attempts[0].Err)
	require.False(t, attempts[2].Retry)
}

func TestStillProcessingWhenTheAttemptsRunOut(t *testing.T) {
	s := newScript(t, answer(202, processingJSON))
	c, _ := newClient(s, client.WithMaxAttempts(4))
	p, err := c.PayOrder(context.Background(), "ord_1", client.PayParams{PaymentMethod: "pm_card_visa"})
	require.ErrorIs(t, err, client.ErrStillProcessing)
	require.NotNil(t, p, "the processing payment comes with the error")
	require.Equal(t, client.StatusProcessing, p.Status)
	require.Equal(t, "pay_1", p.ID)
	require.Equal(t, 4, p.Attempts)
	require.Equal(t, s.requests()[0].Key, p.IdempotencyKey)
	require.Len(t, s.requests(), 4)

	// Calling again with the payment's key continues the same operation.
	s.mu.Lock()
	s.steps = []http.HandlerFunc{answer(201, succeededJSON, "Idempotent-Replayed", "true")}
	s.mu.Unlock()
	p2, err := c.PayOrder(context.Background(), "ord_1", client.PayParams{PaymentMethod: "pm_card_visa"},
		client.WithIdempotencyKey(p.IdempotencyKey))
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p2.Status)
	require.Equal(t, p.IdempotencyKey, s.requests()[4].Key)
}

func TestAcceptedThenDeclinedIsFinal(t *testing.T) {
	s := newScript(t,
		answer(202, processingJSON),
		answer(402, `{"type":"t","title":"Payment declined","status":402,"detail":"D","code":"payment_declined","decline_code":"card_declined","payment_id":"pay_1"}`),
	)
	c, _ := newClient(s)
	p, err := c.PayOrder(context.Background(), "ord_1", client.PayParams{PaymentMethod: "pm_card_declined"})
	require.Nil(t, p)
	require.ErrorIs(t, err, client.ErrPaymentDeclined)
	require.NotErrorIs(t, err, client.ErrStillProcessing)
	require.Len(t, s.requests(), 2)
}

func TestCancellationStopsRetries(t *testing.T) {
	t.Run("while waiting", func(t *testing.T) {
		s := newScript(t, problem(503, "service_unavailable", "Retry-After", "3600"))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The real sleeper: an hour's wait that only the cancellation ends.
		var asked time.Duration
		c := client.New(s.srv.URL, "sk_test_acme", client.WithOnAttempt(func(a client.Attempt) {
			asked = a.Wait
			cancel()
		}))
		done := make(chan error, 1)
		go func() {
			_, err := c.CreateOrder(ctx, orderParams)
			done <- err
		}()
		err := waitFor(t, done)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, time.Hour, asked, "it was waiting out Retry-After")
		require.Len(t, s.requests(), 1)
	})

	t.Run("during an attempt", func(t *testing.T) {
		arrived := make(chan struct{}, 1)
		s := newScript(t, func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			hang(w, r)
		})
		ctx, cancel := context.WithCancel(context.Background())
		c, sl := newClient(s)
		done := make(chan error, 1)
		go func() {
			_, err := c.PayOrder(ctx, "ord_1", client.PayParams{PaymentMethod: "pm_card_visa"})
			done <- err
		}()
		<-arrived
		cancel()
		err := waitFor(t, done)
		require.ErrorIs(t, err, context.Canceled)
		require.Len(t, s.requests(), 1)
		require.Empty(t, sl.recorded(), "no retry after the caller gave up")
	})

	t.Run("while processing", func(t *testing.T) {
		s := newScript(t, answer(202, processingJSON))
		ctx, cancel := context.WithCancel(context.Background())
		c := client.New(s.srv.URL, "sk_test_acme", client.WithSleep(func(ctx context.Context, _ time.Duration) error {
			cancel()
			return ctx.Err()
		}))
		p, err := c.PayOrder(ctx, "ord_1", client.PayParams{PaymentMethod: "pm_card_visa"})
		require.ErrorIs(t, err, client.ErrStillProcessing)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, client.StatusProcessing, p.Status)
		require.Len(t, s.requests(), 1)
	})
}

// waitFor returns what done delivers, failing the test if nothing comes in a
// long while (a guard against a hang, not a measurement).
func waitFor(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not return")
		return nil
	}
}

func TestAnAttemptThatTimesOutIsRetriedUnderTheSameKey(t *testing.T) {
	s := newScript(t, hang, answer(201, succeededJSON))
	c, _ := newClient(s, client.WithAttemptTimeout(100*time.Millisecond))
	p, err := c.PayOrder(context.Background(), "ord_1", client.PayParams{PaymentMethod: "pm_card_visa"})
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p.Status)
	got := s.requests()
	require.GreaterOrEqual(t, len(got), 2, "the hung attempt was given up and retried")
	for _, r := range got {
		require.Equal(t, got[0].Key, r.Key)
	}
}

func TestNetworkErrorsUntilTheAttemptsRunOut(t *testing.T) {
	s := newScript(t, dropConnection)
	c, _ := newClient(s, client.WithMaxAttempts(3))
	_, err := c.CreateOrder(context.Background(), orderParams)
	require.Error(t, err)
	require.ErrorContains(t, err, "gave up after 3 attempts")
	var apiErr *client.APIError
	require.False(t, errors.As(err, &apiErr))
	require.Len(t, s.requests(), 3)
}

func TestGetsAreRetriedWithoutAKey(t *testing.T) {
	s := newScript(t, problem(503, "service_unavailable"), answer(200, succeededJSON))
	c, _ := newClient(s)
	p, err := c.GetPayment(context.Background(), "pay_1")
	require.NoError(t, err)
	require.Equal(t, "pay_1", p.ID)
	require.Empty(t, p.IdempotencyKey)
	got := s.requests()
	require.Len(t, got, 2)
	for _, r := range got {
		require.Equal(t, "GET", r.Method)
		require.Equal(t, "/v1/payments/pay_1", r.Path)
		require.Empty(t, r.Key)
	}
}

func TestAnAnswerThatIsNotAProblem(t *testing.T) {
	s := newScript(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "<html>bad request</html>")
	})
	c, _ := newClient(s)
	_, err := c.RefundPayment(context.Background(), "pay_1", client.RefundParams{})
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.Status)
	require.Empty(t, apiErr.Code)
	require.Contains(t, apiErr.Detail, "bad request")
	require.Equal(t, "{}", s.requests()[0].Body, "no amount: refund all that is left")
}

func TestPaymentInProgressIsRetriedWithTheSameKey(t *testing.T) {
	s := newScript(t,
		problem(409, "payment_in_progress", "Retry-After", "2"),
		problem(409, "payment_in_progress", "Retry-After", "3"),
		answer(201, succeededJSON),
	)
	c, sl := newClient(s, client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	p, err := c.PayOrder(context.Background(), "ord_1", client.PayParams{PaymentMethod: "pm_card_visa"})
	require.NoError(t, err)
	require.Equal(t, client.StatusSucceeded, p.Status)
	require.Equal(t, []time.Duration{2 * time.Second, 3 * time.Second}, sl.recorded(), "after Retry-After each time")
	got := s.requests()
	require.Len(t, got, 3)
	for _, r := range got {
		require.Equal(t, got[0].Key, r.Key, "the same key: the server stored nothing, so it runs again")
	}

	// Attempts run out: the conflict comes back, matching its sentinel.
	s = newScript(t, problem(409, "payment_in_progress", "Retry-After", "1"))
	c, _ = newClient(s, client.WithMaxAttempts(3))
	_, err = c.PayOrder(context.Background(), "ord_1", client.PayParams{PaymentMethod: "pm_card_visa"})
	require.ErrorIs(t, err, client.ErrPaymentInProgress)
	require.Len(t, s.requests(), 3)
}

func TestRefundCanceledIsFinal(t *testing.T) {
	s := newScript(t,
		answer(502, `{"type":"t","title":"Provider unavailable","status":502,"detail":"D","code":"provider_unavailable","refund_id":"re_5"}`),
		answer(409, `{"type":"t","title":"Refund canceled","status":409,"detail":"D","code":"refund_canceled","refund_id":"re_5"}`),
		answer(201, `{"id":"re_6"}`),
	)
	c, _ := newClient(s)
	_, err := c.RefundPayment(context.Background(), "pay_1", client.RefundParams{Amount: 100})
	require.ErrorIs(t, err, client.ErrRefundCanceled)
	var apiErr *client.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "re_5", apiErr.RefundID)
	got := s.requests()
	require.Len(t, got, 2, "the 502 is retried with the same key, the cancel is not retried at all")
	require.Equal(t, got[0].Key, got[1].Key)

	// Refunding again is a new operation: a new call, a new key.
	r, err := c.RefundPayment(context.Background(), "pay_1", client.RefundParams{Amount: 100})
	require.NoError(t, err)
	require.Equal(t, "re_6", r.ID)
	require.NotEqual(t, got[0].Key, s.requests()[2].Key)
}
