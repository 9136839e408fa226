package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
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

type answer struct {
	Status int
	Header http.Header
	Body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(a.Body, &m), string(a.Body))
	return m
}

func call(t *testing.T, method, url, apiKey, idemKey, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func countOrders(t *testing.T, databaseURL string) int64 {
	t.Helper()
	db, err := database.Open(databaseURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer db.Close()
	var n int64
	require.NoError(t, db.Raw("SELECT count(*) FROM orders").Scan(&n).Error)
	return n
}

const orderBody = `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"SKU-1","name":"Coffee","quantity":2,"unit_amount":1250}],"metadata":{}}`

// TestOrdersContractOverHTTP drives the contract's order, error and
// idempotency rules through the real program on each dialect, across a
// restart and with two processes sharing one database.
func TestOrdersContractOverHTTP(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			api := startAPI(t, dbURL)

			created := call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1", orderBody)
			require.Equal(t, 201, created.Status, string(created.Body))
			order := created.json(t)
			require.Equal(t, "order", order["object"])
			require.EqualValues(t, 2500, order["amount_total"])
			require.Equal(t, "pending_payment", order["status"])
			require.Equal(t, "/v1/orders/"+order["id"].(string), created.Header.Get("Location"))

			// Member order and spacing differ, the request is the same.
			replayed := call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1",
				`{"metadata":{},"items":[{"unit_amount":1250,"quantity":2.0,"name":"Coffee","sku":"SKU-1"}],"currency":"BRL","customer_id":"cus_1"}`)
			require.Equal(t, 201, replayed.Status)
			require.Equal(t, "true", replayed.Header.Get("Idempotent-Replayed"))
			require.Equal(t, created.Body, replayed.Body)
			require.EqualValues(t, 1, countOrders(t, dbURL))

			reused := call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1", strings.Replace(orderBody, "cus_1", "cus_2", 1))
			require.Equal(t, 422, reused.Status)
			require.Equal(t, "application/problem+json", reused.Header.Get("Content-Type"))
			require.Equal(t, "idempotency_key_reused", reused.json(t)["code"])

			missing := call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "", orderBody)
			require.Equal(t, 400, missing.Status)
			require.Equal(t, "idempotency_key_missing", missing.json(t)["code"])

			unauthorized := call(t, "POST", api.URL+"/v1/orders", "sk_test_nobody", "order-2", orderBody)
			require.Equal(t, 401, unauthorized.Status)
			require.Equal(t, "unauthorized", unauthorized.json(t)["code"])

			invalid := call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-3", `{"customer_id":"cus_1","currency":"brl","items":[]}`)
			require.Equal(t, 400, invalid.Status)
			require.Equal(t, "validation_failed", invalid.json(t)["code"])
			require.NotEmpty(t, invalid.json(t)["errors"])

			// Same key, other merchant: an independent operation.
			theirs := call(t, "POST", api.URL+"/v1/orders", "sk_test_globex", "order-1", orderBody)
			require.Equal(t, 201, theirs.Status)
			require.Empty(t, theirs.Header.Get("Idempotent-Replayed"))
			require.EqualValues(t, 2, countOrders(t, dbURL))
			require.Equal(t, 404, call(t, "GET", api.URL+"/v1/orders/"+order["id"].(string), "sk_test_globex", "", "").Status)
			got := call(t, "GET", api.URL+"/v1/orders/"+order["id"].(string), "sk_test_acme", "", "")
			require.Equal(t, 200, got.Status)

			// Restart: the record survives and still replays.
			require.NoError(t, api.stop())
			api = startAPI(t, dbURL)
			again := call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1", orderBody)
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
					a := call(t, "POST", base+"/v1/orders", "sk_test_acme", "two-processes", orderBody)
					require.Equal(t, 201, a.Status, string(a.Body))
					bodies[i] = a.Body
				})
			}
			wg.Wait()
			for i := range bodies {
				require.Equal(t, bodies[0], bodies[i])
			}
			require.EqualValues(t, 3, countOrders(t, dbURL))

			list := call(t, "GET", api.URL+"/v1/orders?limit=2", "sk_test_acme", "", "")
			require.Equal(t, 200, list.Status)
			require.Equal(t, "list", list.json(t)["object"])
			require.Len(t, list.json(t)["data"], 2)

			require.NoError(t, second.stop())
			require.NoError(t, api.stop(), "a graceful stop returns nil")
		})
	}
}

func TestBadConfigurationFailsAtStart(t *testing.T) {
	err := run(context.Background(), nil, []string{"IDEMPOTENCY_WAIT=soon"}, io.Discard)
	require.ErrorContains(t, err, "IDEMPOTENCY_WAIT")
}
