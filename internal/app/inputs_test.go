package app_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestInputRules: an order that can never be paid (a zero total) and text
// with bidirectional controls or zero-width spaces are 400
// validation_failed naming the field, and change nothing; the joiners that
// real scripts and emoji need pass. Every refused key may be used again.
func TestInputRules(t *testing.T) {
	testkit.EndToEnd(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			api := apptest.Start(t, dbURL)
			orderID := api.CreateOrder(t, "sk_test_acme")

			refused := []struct {
				name, path, body, field string
			}{
				{"zero total", "/v1/orders", `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"S","name":"Free","quantity":3,"unit_amount":0}]}`, "items"},
				{"bidi override in a name", "/v1/orders", `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"S","name":"Coffee\u202e","quantity":1,"unit_amount":1}]}`, "items[0].name"},
				{"bidi isolate in a sku", "/v1/orders", `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"S\u2067","name":"Tea","quantity":1,"unit_amount":1}]}`, "items[0].sku"},
				{"zero-width space in a sku", "/v1/orders", `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"S\u200bK","name":"Tea","quantity":1,"unit_amount":1}]}`, "items[0].sku"},
				{"embedding in a metadata key", "/v1/orders", `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"S","name":"Tea","quantity":1,"unit_amount":1}],"metadata":{"\u202aref":"x"}}`, "metadata.\u202aref"},
				{"bidi in an added item", "/v1/orders/" + orderID + "/items", `{"sku":"S","name":"\u202dTea","quantity":1,"unit_amount":1}`, "name"},
				{"zero-width space in a customer name", "/v1/customers", `{"email":"zw@example.com","name":"A\u200bda"}`, "name"},
			}
			for _, tc := range refused {
				t.Run(tc.name, func(t *testing.T) {
					key := apptest.NewKey()
					got := apptest.Call(t, "POST", api.URL+tc.path, "sk_test_acme", key, tc.body)
					require.Equal(t, 400, got.Status, string(got.Body))
					problem := got.JSON(t)
					require.Equal(t, "validation_failed", problem["code"])
					fields := problem["errors"].([]any)
					require.Len(t, fields, 1, string(got.Body))
					require.Equal(t, tc.field, fields[0].(map[string]any)["field"], string(got.Body))
					require.NotEmpty(t, fields[0].(map[string]any)["message"])
				})
			}
			require.EqualValues(t, 1, api.Count(t, "SELECT count(*) FROM orders"), "a refused order was stored")
			order := apptest.Call(t, "GET", api.URL+"/v1/orders/"+orderID, "sk_test_acme", "", "")
			require.Len(t, order.JSON(t)["items"], 1, "a refused item was added")
			require.Zero(t, api.Count(t, "SELECT count(*) FROM customers"))
			require.EqualValues(t, 1, api.Count(t, "SELECT count(*) FROM idempotency_records"), "a refusal was stored")

			// Joiners stay: Persian needs the non-joiner, emoji the joiner.
			ok := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", apptest.NewKey(),
				`{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"SKU\u200d1","name":"\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \ud83d\udc69\u200d\ud83d\udcbb","quantity":1,"unit_amount":100},{"sku":"GIFT","name":"Sticker","quantity":1,"unit_amount":0}]}`)
			require.Equal(t, 201, ok.Status, string(ok.Body))
			require.EqualValues(t, 100, ok.JSON(t)["amount_total"])
		})
	}
}
