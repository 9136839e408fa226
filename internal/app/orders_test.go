package app_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestOrdersContractOverHTTP drives the contract's order, error and
// idempotency rules through the real program on each dialect, across a
// restart and with two processes sharing one database.
func TestOrdersContractOverHTTP(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			api := apptest.Start(t, dbURL)

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
			require.NoError(t, api.Stop())
			api = apptest.Start(t, dbURL)
			again := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1", apptest.OrderBody)
			require.Equal(t, 201, again.Status)
			require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
			require.Equal(t, created.Body, again.Body)

			// A second process on the same database: concurrent duplicates
			// spread over both make one order.
			second := apptest.Start(t, dbURL)
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

			require.NoError(t, second.Stop())
			require.NoError(t, api.Stop(), "a graceful stop returns nil")
		})
	}
}
