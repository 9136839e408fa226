package handlers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/testkit"
)

const addressBody = `{"name":"Ada Lovelace","line1":"Rua Augusta, 1500","line2":"Apto 42","city":"São Paulo","postal_code":"01304-001","country":"BR"}`

// orderState is what the orders table holds for the order, read around the
// HTTP layer.
func (a *api) orderState(id string) (version int64, address *string, amountTotal int64) {
	a.t.Helper()
	var row struct {
		Version         int64
		ShippingAddress *string
		AmountTotal     int64
	}
	require.NoError(a.t, a.db.Raw("SELECT version, shipping_address, amount_total FROM orders WHERE id = ?", id).Scan(&row).Error)
	return row.Version, row.ShippingAddress, row.AmountTotal
}

func (a *api) newOrder() string {
	a.t.Helper()
	w := a.do(http.MethodPost, "/v1/orders", acmeKey, orderBody)
	require.Equal(a.t, http.StatusCreated, w.Code, w.Body.String())
	require.Equal(a.t, `"1"`, w.Header().Get("ETag"), "a created order is at version 1")
	var o struct{ ID string }
	require.NoError(a.t, json.Unmarshal(w.Body.Bytes(), &o))
	return o.ID
}

func TestShippingAddressRoute(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, d, nil)
			id := a.newOrder()
			path := "/v1/orders/" + id + "/shipping-address"

			g := a.do(http.MethodGet, "/v1/orders/"+id, acmeKey, "")
			require.Equal(t, `"1"`, g.Header().Get("ETag"))
			require.Contains(t, g.Body.String(), `"shipping_address":null`)

			w := a.do(http.MethodPut, path, acmeKey, addressBody)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			require.Equal(t, `"2"`, w.Header().Get("ETag"))
			var got map[string]any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
			require.EqualValues(t, 2, got["version"])
			var want map[string]any
			require.NoError(t, json.Unmarshal([]byte(addressBody), &want))
			require.Equal(t, want, got["shipping_address"])
			g = a.do(http.MethodGet, "/v1/orders/"+id, acmeKey, "")
			require.Equal(t, `"2"`, g.Header().Get("ETag"))
			require.JSONEq(t, w.Body.String(), g.Body.String(), "what the PUT answers is what GET reads")

			again := a.do(http.MethodPut, path, acmeKey, `{"country":"BR","city":"São Paulo","postal_code":"01304-001","line2":"Apto 42","line1":"Rua Augusta, 1500","name":"Ada Lovelace"}`)
			require.Equal(t, http.StatusOK, again.Code)
			require.Equal(t, `"2"`, again.Header().Get("ETag"), "the same address again is no change")
			require.Equal(t, w.Body.String(), again.Body.String())
			version, _, _ := a.orderState(id)
			require.EqualValues(t, 2, version)

			otherAddress := strings.Replace(addressBody, "Apto 42", "Apto 43", 1)
			cases := []struct {
				name, ifMatch, body string
				status              int
				code                string // of a problem; "" for success
				etag                string // expected on success
			}{
				{name: "stale If-Match", ifMatch: `"1"`, body: otherAddress, status: 412, code: "version_mismatch"},
				{name: "weak tags never match", ifMatch: `W/"2"`, body: otherAddress, status: 412, code: "version_mismatch"},
				{name: "a tag that is no version", ifMatch: `"abc"`, body: otherAddress, status: 412, code: "version_mismatch"},
				{name: "unquoted", ifMatch: `2`, body: otherAddress, status: 400, code: "validation_failed"},
				{name: "star mixed with tags", ifMatch: `*, "2"`, body: otherAddress, status: 400, code: "validation_failed"},
				{name: "an invalid address", body: `{"name":"","line1":"x","city":"y","country":"br","zip":"1"}`, status: 400, code: "validation_failed"},
				{name: "a list holding the current version", ifMatch: `"1", W/"2", "2"`, body: otherAddress, status: 200, etag: `"3"`},
				{name: "star is any version", ifMatch: `*`, body: addressBody, status: 200, etag: `"4"`},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					before, beforeAddress, _ := a.orderState(id)
					var header []string
					if tc.ifMatch != "" {
						header = []string{"If-Match", tc.ifMatch}
					}
					w := a.do(http.MethodPut, path, acmeKey, tc.body, header...)
					if tc.code != "" {
						requireProblem(t, w, tc.status, tc.code)
						after, afterAddress, _ := a.orderState(id)
						require.Equal(t, before, after, "a refused PUT changes nothing")
						require.Equal(t, beforeAddress, afterAddress)
						return
					}
					require.Equal(t, tc.status, w.Code, w.Body.String())
					require.Equal(t, tc.etag, w.Header().Get("ETag"))
				})
			}

			t.Run("an invalid body lists every field", func(t *testing.T) {
				w := a.do(http.MethodPut, path, acmeKey, `{"name":"","line1":"x","city":"y","country":"br","zip":"1"}`)
				p := requireProblem(t, w, 400, "validation_failed")
				fields := make([]string, len(p.Errors))
				for i, f := range p.Errors {
					fields[i] = f.Field
				}
				require.Equal(t, []string{"zip"}, fields, "unknown members are refused before the domain looks")
				w = a.do(http.MethodPut, path, acmeKey, `{"name":"","line1":"x","city":"y","country":"br"}`)
				p = requireProblem(t, w, 400, "validation_failed")
				require.Len(t, p.Errors, 2)
				require.Equal(t, "name", p.Errors[0].Field)
				require.Equal(t, "country", p.Errors[1].Field)
			})
			t.Run("needs no Idempotency-Key, and another merchant's order is not found", func(t *testing.T) {
				requireProblem(t, a.do(http.MethodPut, path, globexKey, addressBody), 404, "not_found")
				requireProblem(t, a.do(http.MethodPut, "/v1/orders/ord_nope/shipping-address", acmeKey, addressBody), 404, "not_found")
				requireProblem(t, a.do(http.MethodPut, path, "", addressBody), 401, "unauthorized")
			})
			t.Run("a paid order keeps its address", func(t *testing.T) {
				require.NoError(t, a.db.Exec("UPDATE orders SET status = 'paid', version = version + 1, updated_at = ? WHERE id = ?", time.Now().UTC(), id).Error)
				before, beforeAddress, _ := a.orderState(id)
				requireProblem(t, a.do(http.MethodPut, path, acmeKey, otherAddress), 409, "order_already_paid")
				w := a.do(http.MethodPut, path, acmeKey, addressBody)
				require.Equal(t, http.StatusOK, w.Code, "the address it has is still accepted, as a no-op: %s", w.Body.String())
				after, afterAddress, _ := a.orderState(id)
				require.Equal(t, before, after)
				require.Equal(t, beforeAddress, afterAddress)
			})
		})
	}
}

func TestAddItemRoute(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, d, nil)
			id := a.newOrder()
			path := "/v1/orders/" + id + "/items"
			tea := `{"sku":"SKU-2","name":"Tea","quantity":3,"unit_amount":800}`

			w := a.do(http.MethodPost, path, acmeKey, tea, "If-Match", `"1"`)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			require.Equal(t, `"2"`, w.Header().Get("ETag"))
			require.Empty(t, w.Header().Get("Location"), "the item has no address of its own")
			var got struct {
				Items       []map[string]any
				AmountTotal int64 `json:"amount_total"`
				Version     int64
			}
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
			require.Len(t, got.Items, 2)
			require.Equal(t, int64(2500+2400), got.AmountTotal)
			require.Equal(t, int64(2), got.Version)
			version, _, total := a.orderState(id)
			require.Equal(t, int64(2), version)
			require.Equal(t, int64(4900), total)

			cases := []struct {
				name, ifMatch, body string
				status              int
				code                string
			}{
				{name: "stale If-Match", ifMatch: `"1"`, body: tea, status: 412, code: "version_mismatch"},
				{name: "an invalid item", body: `{"sku":"","name":"Tea","quantity":0}`, status: 400, code: "validation_failed"},
				{name: "not an object", body: `[1]`, status: 400, code: "validation_failed"},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					var header []string
					if tc.ifMatch != "" {
						header = []string{"If-Match", tc.ifMatch}
					}
					requireProblem(t, a.do(http.MethodPost, path, acmeKey, tc.body, header...), tc.status, tc.code)
					after, _, total := a.orderState(id)
					require.Equal(t, int64(2), after)
					require.Equal(t, int64(4900), total)
				})
			}
			t.Run("another merchant's order is not found", func(t *testing.T) {
				requireProblem(t, a.do(http.MethodPost, path, globexKey, tea), 404, "not_found")
			})
			t.Run("a paid order takes no more items", func(t *testing.T) {
				require.NoError(t, a.db.Exec("UPDATE orders SET status = 'paid' WHERE id = ?", id).Error)
				requireProblem(t, a.do(http.MethodPost, path, acmeKey, tea), 409, "order_already_paid")
				_, _, total := a.orderState(id)
				require.Equal(t, int64(4900), total)
			})
		})
	}
}

func TestSwaggerDocumentsOrderChanges(t *testing.T) {
	a := newAPI(t, database.SQLite, nil)
	handlers.RegisterSwagger(a.router)
	w := a.do(http.MethodGet, "/swagger/doc.json", "", "")
	require.Equal(t, http.StatusOK, w.Code)
	var spec struct {
		Paths map[string]map[string]struct {
			Parameters  []struct{ Name, In string }
			RequestBody struct {
				Content map[string]any
			}
			Responses map[string]struct {
				Headers map[string]any
			}
		}
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &spec))
	params := func(path, method string) []string {
		var out []string
		for _, p := range spec.Paths[path][method].Parameters {
			out = append(out, p.In+":"+p.Name)
		}
		return out
	}
	require.Contains(t, params("/v1/orders/{id}/shipping-address", "put"), "header:If-Match")
	require.NotContains(t, params("/v1/orders/{id}/shipping-address", "put"), "header:Idempotency-Key")
	require.Subset(t, params("/v1/orders/{id}/items", "post"), []string{"header:If-Match", "header:Idempotency-Key"})
	require.Contains(t, spec.Paths["/v1/orders/{id}/items"]["post"].RequestBody.Content, "application/json")
	require.Contains(t, spec.Paths["/v1/orders/{id}/shipping-address"]["put"].Responses["200"].Headers, "ETag")
	require.Contains(t, spec.Paths["/v1/orders/{id}/shipping-address"]["put"].Responses, "412")
	require.Contains(t, spec.Paths["/v1/orders/{id}/items"]["post"].Responses["201"].Headers, "ETag")
	require.Contains(t, spec.Paths["/v1/orders/{id}/items"]["post"].Responses, "412")
	require.Contains(t, spec.Paths["/v1/orders/{id}"]["get"].Responses["200"].Headers, "ETag")
}
