package provider_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/provider"
)

// answer returns a handler that answers every request with status and body.
func answer(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// hang is a handler that never answers. It reads the body first: net/http
// notices a client that hung up only once the body is read to EOF.
func hang(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(waitFor):
	}
}

const validCharge = `{"id":"ch_1","object":"charge","status":"succeeded","amount":1,"currency":"BRL","payment_method":"pm_card_visa","reference":"r","idempotency_key":"k","created":1}`

// refusedURL is an address where nothing listens: dialling it is refused.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr
}

func TestClient_SortsEveryErrorIntoOneKind(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc // nil: nothing listens
		kind    string
		check   func(t *testing.T, err error)
	}{
		{name: "connection refused", kind: "not_executed"},
		{name: "503", handler: answer(503, "application/problem+json", `{"code":"provider_unavailable","detail":"down"}`), kind: "not_executed"},
		{name: "429", handler: answer(429, "text/plain", "slow down"), kind: "not_executed"},
		{name: "500", handler: answer(500, "text/plain", "oops"), kind: "unknown"},
		{name: "502 from a proxy", handler: answer(502, "text/html", "<h1>Bad Gateway</h1>"), kind: "unknown"},
		{name: "504", handler: answer(504, "text/plain", ""), kind: "unknown"},
		{name: "timeout", handler: hang, kind: "unknown"},
		{name: "connection lost after sending", handler: func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}, kind: "unknown"},
		{name: "success with a body that is not JSON", handler: answer(201, "application/json", `{"id":`), kind: "unknown"},
		{name: "success with a body that is not a charge", handler: answer(201, "application/json", `{"hello":"world"}`), kind: "unknown"},
		{name: "redirect", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, kind: "unknown"},
		{name: "charge", handler: answer(201, "application/json", validCharge), kind: "definitive"},
		{name: "422 problem", handler: answer(422, "application/problem+json",
			`{"type":"x","title":"Idempotency key reused","status":422,"detail":"used","code":"idempotency_key_reused"}`),
			kind: "definitive", check: func(t *testing.T, err error) {
				var apiErr *provider.APIError
				require.ErrorAs(t, err, &apiErr)
				require.Equal(t, 422, apiErr.Status)
				require.Equal(t, provider.CodeIdempotencyKeyReused, apiErr.Code)
				require.Equal(t, "used", apiErr.Detail)
				require.NotErrorIs(t, err, provider.ErrNotFound)
			}},
		{name: "400 without a problem body", handler: answer(400, "text/plain", "bad"), kind: "definitive",
			check: func(t *testing.T, err error) {
				var apiErr *provider.APIError
				require.ErrorAs(t, err, &apiErr)
				require.Equal(t, 400, apiErr.Status)
				require.Equal(t, "http_400", apiErr.Code)
			}},
		{name: "404", handler: answer(404, "application/problem+json", `{"code":"not_found","detail":"none"}`), kind: "definitive",
			check: func(t *testing.T, err error) { require.ErrorIs(t, err, provider.ErrNotFound) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := refusedURL(t)
			if tt.handler != nil {
				srv := httptest.NewServer(tt.handler)
				t.Cleanup(srv.Close)
				url = srv.URL
			}
			client := provider.NewClient(url, provider.ClientOptions{Timeout: 500 * time.Millisecond})

			_, err := client.CreateCharge(t.Context(), "key", visa("pay_1"))
			require.Equal(t, tt.kind, errorKind(t, err), "error: %v", err)
			if tt.check != nil {
				tt.check(t, err)
			}
		})
	}
}

func TestClient_CallerCancelledBeforeSending(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	client := provider.NewClient(srv.URL, provider.ClientOptions{})

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := client.CreateCharge(ctx, "key", visa("pay_1"))
	require.Equal(t, "not_executed", errorKind(t, err))
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, hits.Load())
}

func TestClient_SendsTheKeyAndJSON(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		answer(201, "application/json", validCharge)(w, r)
	}))
	t.Cleanup(srv.Close)

	_, err := provider.NewClient(srv.URL+"/", provider.ClientOptions{}).CreateCharge(t.Context(), "the-key", visa("pay_1"))
	require.NoError(t, err)
	require.Equal(t, "/v1/charges", got.URL.Path)
	require.Equal(t, "the-key", got.Header.Get("Idempotency-Key"))
	require.Equal(t, "application/json", got.Header.Get("Content-Type"))
}

// flakyProvider answers 500 while failing is set, else a valid charge, and
// counts the requests that reach it.
type flakyProvider struct {
	failing atomic.Bool
	hits    atomic.Int32
}

func (f *flakyProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	if f.failing.Load() {
		answer(500, "text/plain", "down")(w, r)
		return
	}
	answer(201, "application/json", validCharge)(w, r)
}

// transitions records the breaker's state changes.
type transitions struct {
	mu   sync.Mutex
	seen []string
}

func (tr *transitions) record(_, from, to string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.seen = append(tr.seen, from+"->"+to)
}

func (tr *transitions) get() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.seen...)
}

func TestClient_BreakerOpensAndFailsFast(t *testing.T) {
	flaky := &flakyProvider{}
	flaky.failing.Store(true)
	srv := httptest.NewServer(flaky)
	t.Cleanup(srv.Close)
	var tr transitions
	client := provider.NewClient(srv.URL, provider.ClientOptions{Breaker: provider.BreakerSettings{
		Failures: 3, OpenTimeout: 100 * time.Millisecond, OnStateChange: tr.record,
	}})

	for range 3 {
		_, err := client.CreateCharge(t.Context(), "key", visa("pay_1"))
		require.ErrorIs(t, err, provider.ErrUnknownOutcome)
	}
	require.Equal(t, "open", client.BreakerState(""))

	_, err := client.CreateCharge(t.Context(), "key", visa("pay_1"))
	require.ErrorIs(t, err, provider.ErrCircuitOpen)
	require.ErrorIs(t, err, provider.ErrNotExecuted)
	require.Equal(t, "not_executed", errorKind(t, err))
	require.EqualValues(t, 3, flaky.hits.Load(), "an open breaker sends nothing")

	// The provider recovers; after OpenTimeout one trial call goes through
	// and closes the breaker.
	flaky.failing.Store(false)
	require.Eventually(t, func() bool {
		_, err := client.CreateCharge(t.Context(), "key", visa("pay_1"))
		return err == nil
	}, waitFor, 10*time.Millisecond)
	require.Equal(t, "closed", client.BreakerState(""))
	require.Equal(t, []string{"closed->open", "open->half-open", "half-open->closed"}, tr.get())
}

// TestClient_BreakerPerMerchant: one merchant's failures open that
// merchant's breaker only; another merchant's calls, and calls that name
// no merchant, still reach the provider. Beyond the bound, a closed
// breaker is forgotten before an open one.
func TestClient_BreakerPerMerchant(t *testing.T) {
	flaky := &flakyProvider{}
	flaky.failing.Store(true)
	srv := httptest.NewServer(flaky)
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	var opened []string
	client := provider.NewClient(srv.URL, provider.ClientOptions{Breaker: provider.BreakerSettings{
		Failures: 2, OpenTimeout: time.Hour, Merchants: 2,
		OnStateChange: func(merchant, _, to string) {
			mu.Lock()
			defer mu.Unlock()
			opened = append(opened, merchant+":"+to)
		},
	}})
	as := func(m string) context.Context { return provider.WithMerchant(t.Context(), m) }

	for range 2 {
		_, err := client.CreateCharge(as("acme"), "key", visa("pay_1"))
		require.NotErrorIs(t, err, provider.ErrCircuitOpen)
	}
	_, err := client.CreateCharge(as("acme"), "key", visa("pay_1"))
	require.ErrorIs(t, err, provider.ErrCircuitOpen)
	require.Equal(t, "open", client.BreakerState("acme"))
	require.Equal(t, 1, client.OpenBreakers())

	flaky.failing.Store(false)
	_, err = client.CreateCharge(as("globex"), "key", visa("pay_2"))
	require.NoError(t, err, "another merchant's call goes through")
	_, err = client.GetChargeByKey(t.Context(), "key")
	require.NoError(t, err, "a call that names no merchant goes through")
	require.Equal(t, "closed", client.BreakerState("globex"))

	// Two more merchants, with room for two: globex's closed breaker and
	// then the next closed one go; acme's open one stays.
	for _, m := range []string{"initech", "umbrella"} {
		_, err = client.CreateCharge(as(m), "key", visa("pay_3"))
		require.NoError(t, err)
	}
	require.Equal(t, "open", client.BreakerState("acme"))
	_, err = client.CreateCharge(as("acme"), "key", visa("pay_1"))
	require.ErrorIs(t, err, provider.ErrCircuitOpen, "an open breaker is not forgotten")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"acme:open"}, opened)
}

func TestClient_BreakerCountsRefusedConnections(t *testing.T) {
	client := provider.NewClient(refusedURL(t), provider.ClientOptions{Breaker: provider.BreakerSettings{Failures: 2, OpenTimeout: time.Hour}})
	for range 2 {
		_, err := client.GetChargeByKey(t.Context(), "key")
		require.ErrorIs(t, err, provider.ErrNotExecuted)
		require.NotErrorIs(t, err, provider.ErrCircuitOpen)
	}
	_, err := client.GetChargeByKey(t.Context(), "key")
	require.ErrorIs(t, err, provider.ErrCircuitOpen)
}

func TestClient_BreakerIgnoresDefinitiveAnswers(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{Breaker: provider.BreakerSettings{Failures: 2, OpenTimeout: time.Hour}})

	calls := []struct {
		name string
		call func() error
	}{
		{"decline", func() error {
			charge, err := client.CreateCharge(t.Context(), "declined", withMethod(visa("pay_d"), provider.MethodCardDeclined))
			require.Equal(t, provider.ChargeDeclined, charge.Status)
			return err
		}},
		{"422", func() error {
			other := withMethod(visa("pay_d"), provider.MethodCardVisa)
			_, err := client.CreateCharge(t.Context(), "declined", other)
			return ignore(err, provider.CodeIdempotencyKeyReused)
		}},
		{"400", func() error {
			_, err := client.CreateCharge(t.Context(), "bad", withMethod(visa("pay_b"), "pm_bogus"))
			return ignore(err, provider.CodeValidationFailed)
		}},
		{"404", func() error {
			_, err := client.GetChargeByKey(t.Context(), "missing")
			return ignore(err, provider.CodeNotFound)
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			for range 5 {
				require.NoError(t, c.call())
			}
			require.Equal(t, "closed", client.BreakerState(""))
		})
	}
}

// ignore returns nil if err is the refusal with code, else err.
func ignore(err error, code string) error {
	var apiErr *provider.APIError
	if errors.As(err, &apiErr) && apiErr.Code == code {
		return nil
	}
	return err
}

func TestClient_BreakerIgnoresCallsTheCallerCancelled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hang))
	t.Cleanup(srv.Close)
	client := provider.NewClient(srv.URL, provider.ClientOptions{Breaker: provider.BreakerSettings{Failures: 2, OpenTimeout: time.Hour}})

	for range 5 {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		_, err := client.CreateCharge(ctx, "key", visa("pay_1"))
		cancel()
		require.ErrorIs(t, err, provider.ErrUnknownOutcome)
	}
	require.Equal(t, "closed", client.BreakerState(""), "the caller giving up says nothing about the provider")
}
