package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// storedOrderRow is what the orders table holds for one order: the tests
// count effects there, not in the answers.
type storedOrderRow struct {
	Version     int64
	AmountTotal int64
	Items       int
	Address     string // the JSON text, "" while NULL
}

func readOrderRow(t *testing.T, databaseURL, id string) storedOrderRow {
	t.Helper()
	db, err := database.Open(databaseURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer db.Close()
	var row struct {
		Version         int64
		AmountTotal     int64
		Items           string
		ShippingAddress *string
	}
	require.NoError(t, db.Raw("SELECT version, amount_total, items, shipping_address FROM orders WHERE id = ?", id).Scan(&row).Error)
	var items []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(row.Items), &items))
	s := storedOrderRow{Version: row.Version, AmountTotal: row.AmountTotal, Items: len(items)}
	if row.ShippingAddress != nil {
		s.Address = *row.ShippingAddress
	}
	return s
}

const (
	shippingBody = `{"name":"Ada Lovelace","line1":"Rua Augusta, 1500","line2":"Apto 42","city":"São Paulo","postal_code":"01304-001","country":"BR"}`
	teaItemBody  = `{"sku":"SKU-2","name":"Tea","quantity":3,"unit_amount":800}`
)

// TestOrderChangesOverHTTP drives the changes to an order through the real
// program on each dialect: a PUT of desired state needs no key and repeats
// harmlessly, an added item needs one, and If-Match guards both.
func TestOrderChangesOverHTTP(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			api := apptest.Start(t, dbURL)

			created := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1", apptest.OrderBody)
			require.Equal(t, 201, created.Status, string(created.Body))
			require.Equal(t, `"1"`, created.Header.Get("ETag"))
			id := created.JSON(t)["id"].(string)
			orderURL := api.URL + "/v1/orders/" + id
			got := apptest.Call(t, "GET", orderURL, "sk_test_acme", "", "")
			require.Equal(t, `"1"`, got.Header.Get("ETag"))

			// PUT twice: the same state, one version more, not two.
			first := apptest.Call(t, "PUT", orderURL+"/shipping-address", "sk_test_acme", "", shippingBody)
			require.Equal(t, 200, first.Status, string(first.Body))
			require.Equal(t, `"2"`, first.Header.Get("ETag"))
			afterFirst := readOrderRow(t, dbURL, id)
			second := apptest.Call(t, "PUT", orderURL+"/shipping-address", "sk_test_acme", "", shippingBody)
			require.Equal(t, 200, second.Status)
			require.Equal(t, first.Body, second.Body)
			require.Equal(t, `"2"`, second.Header.Get("ETag"))
			require.Equal(t, afterFirst, readOrderRow(t, dbURL, id))
			require.EqualValues(t, 2, afterFirst.Version)
			require.Contains(t, afterFirst.Address, "Rua Augusta")

			// The same item with the same key twice: one item. With another
			// key: another item, since adding is cumulative.
			added := apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "add-tea-1", teaItemBody)
			require.Equal(t, 201, added.Status, string(added.Body))
			require.Equal(t, `"3"`, added.Header.Get("ETag"))
			replayed := apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "add-tea-1", teaItemBody)
			require.Equal(t, 201, replayed.Status)
			require.Equal(t, "true", replayed.Header.Get("Idempotent-Replayed"))
			require.Equal(t, added.Body, replayed.Body)
			require.EqualValues(t, 3, replayed.JSON(t)["version"], "a replay carries the version in its body")
			row := readOrderRow(t, dbURL, id)
			require.Equal(t, storedOrderRow{Version: 3, AmountTotal: 2500 + 2400, Items: 2, Address: afterFirst.Address}, row)
			require.Equal(t, 400, apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "", teaItemBody).Status,
				"adding an item without a key is refused")
			another := apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "add-tea-2", teaItemBody)
			require.Equal(t, 201, another.Status)
			require.Equal(t, 3, readOrderRow(t, dbURL, id).Items)

			// A stale If-Match: 412, and nothing changes.
			before := readOrderRow(t, dbURL, id)
			stalePut := apptest.Call(t, "PUT", orderURL+"/shipping-address", "sk_test_acme", "",
				strings.Replace(shippingBody, "Apto 42", "Apto 43", 1), "If-Match", `"3"`)
			require.Equal(t, 412, stalePut.Status, string(stalePut.Body))
			require.Equal(t, "application/problem+json", stalePut.Header.Get("Content-Type"))
			require.Equal(t, "version_mismatch", stalePut.JSON(t)["code"])
			staleAdd := apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "add-tea-3", teaItemBody, "If-Match", `"3"`)
			require.Equal(t, 412, staleAdd.Status)
			require.Equal(t, "version_mismatch", staleAdd.JSON(t)["code"])
			require.Equal(t, before, readOrderRow(t, dbURL, id))
			// A 412 is not kept: after reading again, the same key adds the item.
			fresh := apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "add-tea-3", teaItemBody, "If-Match", `"4"`)
			require.Equal(t, 201, fresh.Status, string(fresh.Body))
			require.Empty(t, fresh.Header.Get("Idempotent-Replayed"))
			require.Equal(t, `"5"`, fresh.Header.Get("ETag"))

			// Once paid for its total, the order takes no more items, and the
			// 409 is kept under its key like any business conflict.
			paid := apptest.Call(t, "POST", orderURL+"/payments", "sk_test_acme", "pay-1", `{"payment_method":"pm_card_visa"}`)
			require.Equal(t, 201, paid.Status, string(paid.Body))
			require.EqualValues(t, 2500+3*2400, paid.JSON(t)["amount"])
			late := apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "add-tea-4", teaItemBody)
			require.Equal(t, 409, late.Status)
			require.Equal(t, "order_already_paid", late.JSON(t)["code"])
			again := apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "add-tea-4", teaItemBody)
			require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
			final := readOrderRow(t, dbURL, id)
			require.Equal(t, 4, final.Items)
			require.EqualValues(t, 2500+3*2400, final.AmountTotal)
			// The PUT that set the address is still a harmless repeat.
			require.Equal(t, 200, apptest.Call(t, "PUT", orderURL+"/shipping-address", "sk_test_acme", "", shippingBody).Status)
			require.Equal(t, final, readOrderRow(t, dbURL, id))
		})
	}
}

// TestConcurrentWritersOverHTTP sends n changes at once through the real
// program, all with the If-Match of one GET, and counts what the database
// kept: one change, one version more, and n-1 answers of 412.
func TestConcurrentWritersOverHTTP(t *testing.T) {
	const n = 20
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			api := apptest.Start(t, dbURL)

			for _, route := range []string{"shipping-address", "items"} {
				t.Run(route, func(t *testing.T) {
					created := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-"+route, apptest.OrderBody)
					require.Equal(t, 201, created.Status)
					orderURL := api.URL + "/v1/orders/" + created.JSON(t)["id"].(string)
					etag := apptest.Call(t, "GET", orderURL, "sk_test_acme", "", "").Header.Get("ETag")
					require.Equal(t, `"1"`, etag)

					statuses := make([]int, n)
					start := make(chan struct{})
					var wg sync.WaitGroup
					for i := range n {
						wg.Go(func() {
							<-start
							if route == "items" {
								body := fmt.Sprintf(`{"sku":"SKU-%d","name":"Tea","quantity":1,"unit_amount":100}`, i)
								statuses[i] = apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", fmt.Sprintf("%s-%d", route, i), body,
									"If-Match", etag).Status
								return
							}
							body := strings.Replace(shippingBody, "Apto 42", fmt.Sprintf("Apto %d", i), 1)
							statuses[i] = apptest.Call(t, "PUT", orderURL+"/shipping-address", "sk_test_acme", "", body, "If-Match", etag).Status
						})
					}
					close(start)
					wg.Wait()

					count := map[int]int{}
					for _, s := range statuses {
						count[s]++
					}
					success := 200
					if route == "items" {
						success = 201
					}
					require.Equal(t, map[int]int{success: 1, 412: n - 1}, count)
					row := readOrderRow(t, dbURL, created.JSON(t)["id"].(string))
					require.EqualValues(t, 2, row.Version)
					if route == "items" {
						require.Equal(t, 2, row.Items)
						require.EqualValues(t, 2600, row.AmountTotal)
					} else {
						require.Equal(t, 1, row.Items)
						require.NotEmpty(t, row.Address)
					}
				})
			}
		})
	}
}

// TestRetryOfAnAddedItemReplays loses the answer of an added item and
// retries it as a client would: same key, same body, and the If-Match it
// sent the first time. The retry must replay the 201, not answer for the
// order as it is now (412: the first attempt moved the version).
func TestRetryOfAnAddedItemReplays(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			api := apptest.Start(t, dbURL)
			created := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "order-1", apptest.OrderBody)
			require.Equal(t, 201, created.Status)
			orderURL := api.URL + "/v1/orders/" + created.JSON(t)["id"].(string)

			first := apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "add-1", teaItemBody, "If-Match", `"1"`)
			require.Equal(t, 201, first.Status, string(first.Body))
			refreshed := apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "add-1", teaItemBody, "If-Match", `"2"`)
			require.Equal(t, "true", refreshed.Header.Get("Idempotent-Replayed"), "a retry that re-read the order replays")
			require.Equal(t, first.Body, refreshed.Body)
			require.Equal(t, 2, readOrderRow(t, dbURL, created.JSON(t)["id"].(string)).Items)

			// The retry that resends the original If-Match: the handler says
			// 412 (the version moved), but the key's record answers.
			same := apptest.Call(t, "POST", orderURL+"/items", "sk_test_acme", "add-1", teaItemBody, "If-Match", `"1"`)
			require.Equal(t, 201, same.Status, string(same.Body))
			require.Equal(t, "true", same.Header.Get("Idempotent-Replayed"))
			require.Equal(t, first.Body, same.Body)
			require.Equal(t, 2, readOrderRow(t, dbURL, created.JSON(t)["id"].(string)).Items)
		})
	}
}
