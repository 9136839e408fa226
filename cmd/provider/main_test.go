package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// listeningURL waits for run's "listening" log line and returns its URL.
func listeningURL(t *testing.T, out *testkit.SyncBuffer) string {
	t.Helper()
	var url string
	require.Eventually(t, func() bool {
		scanner := bufio.NewScanner(strings.NewReader(out.String()))
		for scanner.Scan() {
			var line struct{ Msg, URL string }
			if json.Unmarshal(scanner.Bytes(), &line) == nil && line.Msg == "mock provider listening" {
				url = line.URL
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond)
	return url
}

func TestRun_ServesChargesAndWebhooksThenShutsDown(t *testing.T) {
	received := make(chan provider.Event, 10)
	webhook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		if provider.VerifySignature("whsec_env", r.Header.Get(provider.SignatureHeader), body.Bytes(), time.Now(), 0) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev provider.Event
		_ = json.Unmarshal(body.Bytes(), &ev)
		received <- ev
	}))
	t.Cleanup(webhook.Close)

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	out := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nil, env(map[string]string{
			"HTTP_ADDR":              "127.0.0.1:0",
			"WEBHOOK_URL":            webhook.URL,
			"WEBHOOK_SECRET":         "whsec_env",
			"DUPLICATE_WEBHOOK_RATE": "0",
		}), out)
	}()
	url := listeningURL(t, out)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/healthz", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	charge, err := provider.NewClient(url, provider.ClientOptions{}).CreateCharge(t.Context(), "k", provider.ChargeRequest{
		Amount: 100, Currency: "BRL", PaymentMethod: provider.MethodCardVisa, Reference: "pay_1",
	})
	require.NoError(t, err)
	select {
	case ev := <-received:
		require.Equal(t, provider.EventChargeSucceeded, ev.Type)
		got, err := ev.Charge()
		require.NoError(t, err)
		require.Equal(t, charge, got)
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook arrived")
	}

	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}
	require.Contains(t, out.String(), "shutting down")
}

func TestRun_RefusesBadConfiguration(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		args []string
		want []string // every one must appear in the error
	}{
		{"rate above one", map[string]string{"CHAOS_LOST_RESPONSE_RATE": "1.5"}, nil, []string{"CHAOS_LOST_RESPONSE_RATE"}},
		{"rate not a number", map[string]string{"CHAOS_UNAVAILABLE_RATE": "often"}, nil, []string{"CHAOS_UNAVAILABLE_RATE"}},
		{"latency not a duration", map[string]string{"CHAOS_LATENCY": "50"}, nil, []string{"CHAOS_LATENCY"}},
		{"duplicate rate negative", map[string]string{"DUPLICATE_WEBHOOK_RATE": "-0.1"}, nil, []string{"DUPLICATE_WEBHOOK_RATE"}},
		{"webhook URL relative", map[string]string{"WEBHOOK_URL": "/v1/webhooks/provider"}, nil, []string{"WEBHOOK_URL"}},
		{"every problem at once", map[string]string{"CHAOS_LATENCY": "x", "CHAOS_UNAVAILABLE_RATE": "2"}, nil,
			[]string{"CHAOS_LATENCY", "CHAOS_UNAVAILABLE_RATE"}},
		{"unknown traces exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, nil, []string{"OTEL_TRACES_EXPORTER"}},
		{"OTLP over gRPC", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, nil,
			[]string{"OTEL_EXPORTER_OTLP_PROTOCOL"}},
		{"stray arguments", nil, []string{"serve"}, []string{"unexpected arguments"}},
		{"bad address", map[string]string{"HTTP_ADDR": "256.0.0.1:1"}, nil, []string{"listen"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), tt.args, env(tt.vars), &testkit.SyncBuffer{})
			require.Error(t, err)
			for _, want := range tt.want {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		addr, cfg, traces, err := loadConfig(env(nil))
		require.NoError(t, err)
		require.Equal(t, ":8081", addr)
		require.Equal(t, provider.Config{}, cfg, "the zero Config carries the documented defaults")
		require.False(t, traces.Enabled(), "no OTLP endpoint, no tracing")
	})
	t.Run("everything set", func(t *testing.T) {
		addr, cfg, traces, err := loadConfig(env(map[string]string{
			"HTTP_ADDR":                   ":9000",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
			"WEBHOOK_URL":                 "http://localhost:8080/v1/webhooks/provider",
			"WEBHOOK_SECRET":              "s",
			"DUPLICATE_WEBHOOK_RATE":      "0.5",
			"CHAOS_LOST_RESPONSE_RATE":    "0.01",
			"CHAOS_UNAVAILABLE_RATE":      "0.02",
			"CHAOS_LATENCY":               "50ms",
		}))
		require.NoError(t, err)
		require.Equal(t, ":9000", addr)
		require.Equal(t, provider.Config{
			WebhookURL:           "http://localhost:8080/v1/webhooks/provider",
			WebhookSecret:        "s",
			DuplicateWebhookRate: 0.5,
			Chaos:                provider.Chaos{LostResponseRate: 0.01, UnavailableRate: 0.02, Latency: 50 * time.Millisecond},
		}, cfg)
		require.Equal(t, "http://collector:4318/v1/traces", traces.Endpoint)
	})
	t.Run("no duplicates", func(t *testing.T) {
		_, cfg, _, err := loadConfig(env(map[string]string{"DUPLICATE_WEBHOOK_RATE": "0"}))
		require.NoError(t, err)
		require.Negative(t, cfg.DuplicateWebhookRate, "zero in the environment means none, not the default")
	})
}

func TestRun_Help(t *testing.T) {
	out := &testkit.SyncBuffer{}
	require.NoError(t, run(t.Context(), []string{"-h"}, env(nil), out))
	for _, name := range []string{"HTTP_ADDR", "WEBHOOK_URL", "WEBHOOK_SECRET", "DUPLICATE_WEBHOOK_RATE",
		"CHAOS_LOST_RESPONSE_RATE", "CHAOS_UNAVAILABLE_RATE", "CHAOS_LATENCY", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER"} {
		require.Contains(t, out.String(), name)
	}
}
