package apptest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	goodOrder = `{"id":"ord_1","object":"order","customer_id":"cus_1","currency":"BRL","items":[{"sku":"SKU-1","name":"Coffee","quantity":2,"unit_amount":1250}],"amount_total":2500,"status":"pending_payment","metadata":{},"shipping_address":null,"version":1,"created_at":"2025-06-01T12:00:00.123456Z"}`
	declined  = `{"type":"https://errors.idempotent-payments.dev/payment_declined","title":"Payment declined","status":402,"detail":"d","code":"payment_declined","decline_code":"card_declined","payment_id":"pay_1"}`
)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// TestCheckExchange: the check passes what the API sends and fails each
// kind of drift the document must catch.
func TestCheckExchange(t *testing.T) {
	post := func(path string) *http.Request { return httptest.NewRequest(http.MethodPost, path, nil) }
	created := header("Content-Type", "application/json", "Location", "/v1/orders/ord_1")
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		header http.Header
		body   string
		want   string // "" means no problem
	}{
		{"a created order", post("/v1/orders"), 201, created, goodOrder, ""},
		{"a replay", post("/v1/orders"), 201, header("Content-Type", "application/json", "Location", "/v1/orders/ord_1", "Idempotent-Replayed", "true"), goodOrder, ""},
		{"a decline", post("/v1/orders/ord_1/payments"), 402, header("Content-Type", "application/problem+json"), declined, ""},
		{"an unknown path", httptest.NewRequest(http.MethodGet, "/v1/nothing", nil), 404, header("Content-Type", "application/problem+json"), `{}`, ""},
		{"metrics are out of scope", httptest.NewRequest(http.MethodGet, "/metrics", nil), 200, header("Content-Type", "text/plain"), "x", ""},

		{"an undeclared member", post("/v1/orders"), 201, created, strings.Replace(goodOrder, `"version":1`, `"version":1,"secret":"x"`, 1), "secret"},
		{"a missing member", post("/v1/orders"), 201, created, strings.Replace(goodOrder, `"shipping_address":null,`, ``, 1), "shipping_address"},
		{"a null where none is allowed", post("/v1/orders"), 201, created, strings.Replace(goodOrder, `"customer_id":"cus_1"`, `"customer_id":null`, 1), "customer_id"},
		{"a time that is no date-time", post("/v1/orders"), 201, created, strings.Replace(goodOrder, `2025-06-01T12:00:00.123456Z`, `yesterday`, 1), "date-time"},
		{"an undocumented status", post("/v1/orders"), 418, header("Content-Type", "application/problem+json"), `{}`, "418"},
		{"gin's charset spelling", post("/v1/orders"), 201, header("Content-Type", "application/json; charset=utf-8", "Location", "/x"), goodOrder, "spelt so"},
		{"a problem as plain JSON", post("/v1/orders"), 422, header("Content-Type", "application/json"), `{}`, "application/problem+json"},
		{"a missing Location", post("/v1/orders"), 201, header("Content-Type", "application/json"), goodOrder, "Location"},
		{"Idempotent-Replayed other than true", post("/v1/orders"), 201, header("Content-Type", "application/json", "Location", "/x", "Idempotent-Replayed", "yes"), goodOrder, "idempotent-replayed"},
		{"a 429 without Retry-After", post("/v1/orders"), 429, header("Content-Type", "application/problem+json"),
			`{"type":"https://errors.idempotent-payments.dev/rate_limited","title":"Rate limited","status":429,"detail":"d","code":"rate_limited"}`, "Retry-After"},
		{"a code of another status", post("/v1/orders"), 409, header("Content-Type", "application/problem+json"),
			`{"type":"https://errors.idempotent-payments.dev/not_found","title":"Not found","status":409,"detail":"d","code":"not_found"}`, "code"},
		{"a 402 without payment_id", post("/v1/orders/ord_1/payments"), 402, header("Content-Type", "application/problem+json"), strings.Replace(declined, `,"payment_id":"pay_1"`, ``, 1), "payment_id"},
		{"a path in no route answered other than its 404", httptest.NewRequest(http.MethodGet, "/v1/nowhere", nil), 200, header("Content-Type", "application/json"), `{}`, "in no route"},
		{"a 405 whose Allow misses a method", httptest.NewRequest(http.MethodDelete, "/v1/orders", nil), 405, header("Content-Type", "application/problem+json", "Allow", "GET"), `{}`, "Allow"},
		{"a method the route does not serve answered other than 405", httptest.NewRequest(http.MethodDelete, "/v1/orders", nil), 200, header("Content-Type", "application/json"), `{}`, "not 405"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := checkExchange(tc.req, tc.status, tc.header, []byte(tc.body))
			if tc.want == "" {
				require.Empty(t, problems)
				return
			}
			require.NotEmpty(t, problems, "the check let it pass")
			require.Contains(t, strings.Join(problems, "\n"), tc.want)
		})
	}
}

// BenchmarkCheckExchange is what the check adds to each answer of the
// end-to-end tests.
func BenchmarkCheckExchange(b *testing.B) {
	req := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
	h := header("Content-Type", "application/json", "Location", "/v1/orders/ord_1")
	for b.Loop() {
		if _, problems := checkExchange(req, 201, h, []byte(goodOrder)); problems != nil {
			b.Fatal(problems)
		}
	}
}

// TestCheckRequest: the request check passes what the API should do and
// fails an accepted request the document forbids, and a refused one it
// allows (unless an x-validation-rule explains the refusal).
func TestCheckRequest(t *testing.T) {
	const order = `{"customer_id":"cus_1","currency":"SEK","items":[{"sku":"S","name":"N","quantity":2,"unit_amount":1}]}`
	noUnitAmount := strings.Replace(order, `,"unit_amount":1`, ``, 1)
	problem := func(status int, code, fields string) string {
		return fmt.Sprintf(`{"type":"https://errors.idempotent-payments.dev/%s","title":"t","status":%d,"detail":"d","code":"%s","errors":[%s]}`, code, status, code, fields)
	}
	post := func(contentType string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
		r.Header.Set("Authorization", "Bearer sk_test_acme")
		r.Header.Set("Idempotency-Key", "k1")
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		return r
	}
	whole := func(body string) sentBody { return sentBody{data: []byte(body), whole: true} }
	for _, tc := range []struct {
		name   string
		req    *http.Request
		sent   sentBody
		status int
		answer string
		want   string // "" means no problem
	}{
		{"a valid order, created", post("application/json"), whole(order), 201, goodOrder, ""},
		{"with charset=utf-8", post("application/json; charset=utf-8"), whole(order), 201, goodOrder, ""},
		{"a missing unit_amount, refused", post("application/json"), whole(noUnitAmount), 400, problem(400, "validation_failed", `{"field":"items[0].unit_amount","message":"is required"}`), ""},
		{"a missing unit_amount, accepted", post("application/json"), whole(noUnitAmount), 201, goodOrder, "forbids"},
		{"text/plain, refused", post("text/plain"), whole(order), 415, problem(415, "unsupported_media_type", ""), ""},
		{"no Content-Type, accepted", post(""), whole(order), 201, goodOrder, "forbids"},
		{"a valid order refused as invalid", post("application/json"), whole(order), 400, problem(400, "validation_failed", `{"field":"customer_id","message":"x"}`), "allows"},
		{"a valid order refused for a rule the schema cannot state", post("application/json"), whole(order), 400, problem(400, "validation_failed", `{"field":"items","message":"the order total must be positive"}`), ""},
		{"a valid order refused with 415", post("application/json"), whole(order), 415, problem(415, "unsupported_media_type", ""), "allows"},
		{"a body not read whole is not judged", post("application/json"), sentBody{data: []byte(`{"cust`)}, 413, problem(413, "request_too_large", ""), ""},
		{"no key, refused", func() *http.Request { r := post("application/json"); r.Header.Del("Idempotency-Key"); return r }(), whole(order), 400, problem(400, "idempotency_key_missing", ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := checkRequest(tc.req, tc.sent, tc.status, []byte(tc.answer))
			if tc.want == "" {
				require.Empty(t, problems)
				return
			}
			require.NotEmpty(t, problems, "the check let it pass")
			require.Contains(t, strings.Join(problems, "\n"), tc.want)
		})
	}
}
