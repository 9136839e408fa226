package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// apiProcess is one run() of the API, serving on a loopback port.
type apiProcess struct {
	URL  string
	stop func() error
}

// freeAddr is a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string { return testkit.FreeAddr(t) }

func startAPI(t *testing.T, databaseURL string, extra ...string) *apiProcess {
	t.Helper()
	addr := ""
	for _, kv := range extra {
		if a, ok := strings.CutPrefix(kv, "HTTP_ADDR="); ok {
			addr = a
		}
	}
	if addr == "" {
		addr = freeAddr(t)
	}
	environ := append([]string{
		"HTTP_ADDR=" + addr,
		"DATABASE_URL=" + databaseURL,
		"DEMO_SEED=true",
		"IDEMPOTENCY_WAIT=5s",
		"LOG_LEVEL=warn",
		"DB_MAX_CONNS=10",
	}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &testkit.SyncBuffer{}
	go func() { done <- run(ctx, nil, environ, logs) }()

	p := &apiProcess{URL: "http://" + addr}
	var once sync.Once
	var stopErr error
	p.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = fmt.Errorf("run did not return")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { _ = p.stop() })

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("api exited at start: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(p.URL + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		require.True(t, time.Now().Before(deadline), "api did not become healthy")
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOrdersContractOverHTTP drives the contract's order, error and
// idempotency rules through the real program on each dialect, across a
// restart and with two processes sharing one database.
func TestOrdersContractOverHTTP(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			api := startAPI(t, dbURL)

			created := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1", apptest.OrderBody)
			require.Equal(t, 201, created.Status, string(created.Body))
			order := created.JSON(t)
			require.Equal(t, "order", order["object"])
			require.EqualValues(t, 2500, order["amount_total"])
			require.Equal(t, "pending_payment", order["status"])
			require.Equal(t, "/v1/orders/"+order["id"].(string), created.Header.Get("Location"))

			// Member order and spacing differ, the request is the same.
			replayed := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1",
				`{"metadata":{},"items":[{"unit_amount":1250,"quantity":2.0,"name":"Coffee","sku":"SKU-1"}],"currency":"BRL","customer_id":"cus_1"}`)
			require.Equal(t, 201, replayed.Status)
			require.Equal(t, "true", replayed.Header.Get("Idempotent-Replayed"))
			require.Equal(t, created.Body, replayed.Body)
			require.EqualValues(t, 1, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"))

			reused := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1", strings.Replace(apptest.OrderBody, "cus_1", "cus_2", 1))
			require.Equal(t, 422, reused.Status)
			require.Equal(t, "application/problem+json", reused.Header.Get("Content-Type"))
			require.Equal(t, "idempotency_key_reused", reused.JSON(t)["code"])

			missing := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "", apptest.OrderBody)
			require.Equal(t, 400, missing.Status)
			require.Equal(t, "idempotency_key_missing", missing.JSON(t)["code"])

			unauthorized := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_nobody", "order-2", apptest.OrderBody)
			require.Equal(t, 401, unauthorized.Status)
			require.Equal(t, "unauthorized", unauthorized.JSON(t)["code"])

			invalid := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-3", `{"customer_id":"cus_1","currency":"brl","items":[]}`)
			require.Equal(t, 400, invalid.Status)
			require.Equal(t, "validation_failed", invalid.JSON(t)["code"])
			require.NotEmpty(t, invalid.JSON(t)["errors"])

			// Same key, other merchant: an independent operation.
			theirs := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_globex", "order-1", apptest.OrderBody)
			require.Equal(t, 201, theirs.Status)
			require.Empty(t, theirs.Header.Get("Idempotent-Replayed"))
			require.EqualValues(t, 2, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"))
			require.Equal(t, 404, apptest.Call(t, "GET", api.URL+"/v1/orders/"+order["id"].(string), "sk_test_globex", "", "").Status)
			got := apptest.Call(t, "GET", api.URL+"/v1/orders/"+order["id"].(string), "sk_test_acme", "", "")
			require.Equal(t, 200, got.Status)

			// Restart: the record survives and still replays.
			require.NoError(t, api.stop())
			api = startAPI(t, dbURL)
			again := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1", apptest.OrderBody)
			require.Equal(t, 201, again.Status)
			require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
			require.Equal(t, created.Body, again.Body)

			// A second process on the same database: concurrent duplicates
			// spread over both make one order.
			second := startAPI(t, dbURL)
			var wg sync.WaitGroup
			bodies := make([][]byte, 40)
			for i := range 40 {
				base := api.URL
				if i%2 == 1 {
					base = second.URL
				}
				wg.Go(func() {
					a := apptest.Call(t, "POST", base+"/v1/orders", "sk_test_acme", "two-processes", apptest.OrderBody)
					require.Equal(t, 201, a.Status, string(a.Body))
					bodies[i] = a.Body
				})
			}
			wg.Wait()
			for i := range bodies {
				require.Equal(t, bodies[0], bodies[i])
			}
			require.EqualValues(t, 3, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"))

			list := apptest.Call(t, "GET", api.URL+"/v1/orders?limit=2", "sk_test_acme", "", "")
			require.Equal(t, 200, list.Status)
			require.Equal(t, "list", list.JSON(t)["object"])
			require.Len(t, list.JSON(t)["data"], 2)

			require.NoError(t, second.stop())
			require.NoError(t, api.stop(), "a graceful stop returns nil")
		})
	}
}

func TestBadConfigurationFailsAtStart(t *testing.T) {
	err := run(context.Background(), nil, []string{"IDEMPOTENCY_WAIT=soon"}, io.Discard)
	require.ErrorContains(t, err, "IDEMPOTENCY_WAIT")
}
