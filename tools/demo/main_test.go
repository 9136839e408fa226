package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// startAPI builds cmd/api and runs it on SQLite in a temporary folder with
// short timeouts, returning its base URL once /healthz answers.
func startAPI(t *testing.T) string {
	t.Helper()
	bin := testkit.Binaries(t, "cmd/api")[0]
	api := apptest.StartBinary(t, bin, "sqlite:"+filepath.Join(t.TempDir(), "payments.db"), apptest.Env(
		"PROVIDER_URL=", "REDIS_URL=", "DEMO_SEED=true",
		"PROVIDER_TIMEOUT=500ms",
		"RECONCILE_INTERVAL=500ms",
		// The webhook must not resolve the payment before the API gives
		// up on the provider, or there is no 202 to show.
		"PROVIDER_WEBHOOK_DELAY=30s",
	))
	return api.URL
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDemoAgainstRealAPI(t *testing.T) {
	testkit.EndToEnd(t)
	base := startAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var out bytes.Buffer
	err := run(ctx, []string{"-poll-interval", "200ms"}, env(map[string]string{"API_URL": base, "API_KEY": "sk_test_acme"}), &out)
	got := out.String()
	t.Logf("demo output:\n%s", got)
	require.NoError(t, err)

	require.Contains(t, got, "< 201 Created", "the order, then the final payment")
	require.Contains(t, got, "< 202 Accepted", "the lost response")
	require.Contains(t, got, `"status": "processing"`)
	require.Contains(t, got, "< Location: /v1/payments/pay_")
	require.Contains(t, got, `"status": "succeeded"`)
	require.Contains(t, got, "< Idempotent-Replayed: true", "the reconciler finished the record, so the retry replays it")
	require.Contains(t, got, `"state": "completed"`)
	require.Contains(t, got, "< 422 Unprocessable Entity")
	require.Contains(t, got, `"code": "idempotency_key_reused"`)
	require.NotContains(t, got, "NOTE:", "no webhook beat the 202 with PROVIDER_WEBHOOK_DELAY=30s")
	for i := 1; i <= 6; i++ {
		require.Contains(t, got, "=== Step "+string(rune('0'+i))+"/6")
	}
	// The final 201 is the retry's, after the 202.
	require.Less(t, strings.Index(got, "< 202 Accepted"), strings.LastIndex(got, "< 201 Created"))
}

func TestDemoServerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	var out bytes.Buffer
	err = run(context.Background(), nil, env(map[string]string{"API_URL": "http://" + addr}), &out)
	require.Error(t, err)
	require.Contains(t, err.Error(), "server unreachable at http://"+addr)
}

func TestDemoUnexpectedAnswer(t *testing.T) {
	// A server that is healthy but rejects the API key: step 1 must fail
	// with the status and body it got.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"status":401,"code":"unauthorized"}`))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	var out bytes.Buffer
	err = run(context.Background(), nil, env(map[string]string{"API_URL": "http://" + ln.Addr().String(), "API_KEY": "sk_wrong"}), &out)
	require.Error(t, err)
	require.Contains(t, err.Error(), "step 1: expected 201")
	require.Contains(t, err.Error(), "401")
	require.Contains(t, out.String(), "< 401 Unauthorized")
}
