package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/problem"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestHostileInput sends the real program, on each dialect, what a careless
// or malicious client sends: other merchants' ids and keys, oversized and
// malformed bodies, keys with control characters and header injection. Every
// case must be refused with the contract's problem+json and leave no trace:
// the rows of every table that holds an effect, the idempotency records and
// the provider's ledger are compared before and after each request.
//
// Run with: go test ./internal/app -run Hostile -count=1 -v
func TestHostileInput(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			h := newHostileWorld(t, dialect)

			t.Run("refused with problem+json and no effect", func(t *testing.T) {
				for _, tc := range h.cases(t) {
					t.Run(tc.name, func(t *testing.T) {
						before := h.effects(t)
						a := apptest.Send(t, tc.req)
						requireProblem(t, a, tc.status, tc.code)
						require.Equal(t, before, h.effects(t), "the refused request changed something")
					})
				}
			})

			t.Run("raw bytes below net/http", func(t *testing.T) {
				for _, tc := range rawHeaderCases() {
					t.Run(tc.name, func(t *testing.T) {
						before := h.effects(t)
						a := apptest.SendRaw(t, h.api.Addr, rawOrderRequest(tc.header))
						// Whether net/http refuses the bytes itself (its
						// answers are rewritten: handlers.GuardListener) or
						// the API refuses the headers they make, the answer
						// is problem+json.
						requireProblem(t, a, tc.status, tc.code)
						require.Equal(t, before, h.effects(t), "the refused request changed something")
					})
				}
			})

			t.Run("another merchant's key is another operation", func(t *testing.T) {
				// The same key and body from globex run afresh for globex:
				// never a replay of acme's answer, never acme's record.
				theirs := apptest.Call(t, "POST", h.api.URL+"/v1/orders", "sk_test_globex", h.acmeOrderKey, apptest.OrderBody)
				require.Equal(t, 201, theirs.Status, string(theirs.Body))
				require.Empty(t, theirs.Header.Get("Idempotent-Replayed"))
				require.NotEqual(t, h.acmeOrder, theirs.JSON(t)["id"])

				for _, who := range []struct{ apiKey, orderID string }{
					{"sk_test_acme", h.acmeOrder},
					{"sk_test_globex", theirs.JSON(t)["id"].(string)},
				} {
					rec := apptest.Call(t, "GET", h.api.URL+"/v1/idempotency-keys/"+h.acmeOrderKey, who.apiKey, "", "")
					require.Equal(t, 200, rec.Status, string(rec.Body))
					stored := rec.JSON(t)["response"].(map[string]any)["body"].(map[string]any)
					require.Equal(t, who.orderID, stored["id"], "each merchant sees its own answer under the shared key")
				}

				// A payment key of acme's, used by globex for its own order:
				// a charge of globex's, not a replay of acme's payment.
				charges := len(h.api.Provider.Server.Charges())
				paid := apptest.Call(t, "POST", h.api.URL+"/v1/orders/"+h.globexOrder+"/payments", "sk_test_globex", h.acmePayKey, `{"payment_method":"pm_card_visa"}`)
				require.Equal(t, 201, paid.Status, string(paid.Body))
				require.Empty(t, paid.Header.Get("Idempotent-Replayed"))
				require.NotEqual(t, h.acmePayment, paid.JSON(t)["id"])
				require.Equal(t, h.globexOrder, paid.JSON(t)["order_id"])
				require.Len(t, h.api.Provider.Server.Charges(), charges+1)
			})
		})
	}
}

// hostileWorld is one API with a provider that sends no webhooks (so that
// nothing changes the database behind the test's back), and a few
// resources of each merchant to aim at.
type hostileWorld struct {
	api *apptest.API
	db  *database.DB

	acmeOrder    string // pending payment, created under acmeOrderKey
	acmeOrderKey string
	acmePaidOrd  string // paid by acmePayment under acmePayKey
	acmePayment  string
	acmePayKey   string
	globexOrder  string // pending payment
}

func newHostileWorld(t *testing.T, dialect database.Dialect) *hostileWorld {
	t.Helper()
	dbURL := testkit.DatabaseURL(t, dialect)
	h := &hostileWorld{api: apptest.Start(t, dbURL, apptest.WithSilentProvider(provider.Config{DuplicateWebhookRate: -1}))}
	var err error
	h.db, err = database.Open(dbURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.db.Close() })

	create := func(apiKey, key string) string {
		a := apptest.Call(t, "POST", h.api.URL+"/v1/orders", apiKey, key, apptest.OrderBody)
		require.Equal(t, 201, a.Status, string(a.Body))
		return a.JSON(t)["id"].(string)
	}
	h.acmeOrderKey = "hostile-acme-order"
	h.acmeOrder = create("sk_test_acme", h.acmeOrderKey)
	h.acmePaidOrd = create("sk_test_acme", apptest.NewKey())
	h.acmePayKey = "hostile-acme-payment"
	paid := apptest.Call(t, "POST", h.api.URL+"/v1/orders/"+h.acmePaidOrd+"/payments", "sk_test_acme", h.acmePayKey, `{"payment_method":"pm_card_visa"}`)
	require.Equal(t, 201, paid.Status, string(paid.Body))
	h.acmePayment = paid.JSON(t)["id"].(string)
	refund := apptest.Call(t, "POST", h.api.URL+"/v1/payments/"+h.acmePayment+"/refunds", "sk_test_acme", apptest.NewKey(), `{"amount":100}`)
	require.Equal(t, 201, refund.Status, string(refund.Body))
	h.globexOrder = create("sk_test_globex", apptest.NewKey())
	return h
}

// effects is everything a request could have changed: rows and the sums
// that move when a row is updated, the idempotency records (whose fences
// move on a takeover), and the provider's ledger.
type effects struct {
	Orders, OrderVersions         int64
	Payments, AmountRefunded      int64
	Refunds                       int64
	Records, Fences               int64
	WebhookEvents, Outbox         int64
	Charges, ProviderRefunds      int
	ShippingAddresses, PaidOrders int64
}

func (h *hostileWorld) effects(t *testing.T) effects {
	t.Helper()
	var e effects
	scan := func(query string, dst ...any) {
		t.Helper()
		row := h.db.Raw(query).Row()
		require.NoError(t, row.Scan(dst...), query)
	}
	scan("SELECT count(*), COALESCE(SUM(version), 0) FROM orders", &e.Orders, &e.OrderVersions)
	scan("SELECT count(*) FROM orders WHERE shipping_address IS NOT NULL", &e.ShippingAddresses)
	scan("SELECT count(*) FROM orders WHERE status = 'paid'", &e.PaidOrders)
	scan("SELECT count(*), COALESCE(SUM(amount_refunded), 0) FROM payments", &e.Payments, &e.AmountRefunded)
	scan("SELECT count(*) FROM refunds", &e.Refunds)
	scan("SELECT count(*), COALESCE(SUM(fence), 0) FROM idempotency_records", &e.Records, &e.Fences)
	scan("SELECT count(*) FROM webhook_events", &e.WebhookEvents)
	scan("SELECT count(*) FROM outbox_events", &e.Outbox)
	e.Charges, e.ProviderRefunds = len(h.api.Provider.Server.Charges()), len(h.api.Provider.Server.Refunds())
	return e
}

type hostileCase struct {
	name   string
	req    apptest.Request
	status int
	code   string
}

// requireProblem checks an answer is the contract's problem+json for code.
func requireProblem(t *testing.T, a apptest.Answer, status int, code string) {
	t.Helper()
	testkit.RequireProblem(t, a.Status, a.Header, a.Body, status, code)
}

// Bodies of every route, valid unless a case changes them.
const (
	payBody     = `{"payment_method":"pm_card_visa"}`
	refundBody  = `{"amount":100}`
	itemBody    = `{"sku":"SKU-2","name":"Tea","quantity":1,"unit_amount":500}`
	addressBody = `{"name":"Ada","line1":"Rua Augusta, 1500","city":"São Paulo","postal_code":"01304-001","country":"BR"}`
)

// withMetadata is apptest.OrderBody with metadata set to the JSON text value.
func withMetadata(value string) string {
	return strings.Replace(apptest.OrderBody, `"metadata":{}`, `"metadata":{"x":`+value+`}`, 1)
}

func (h *hostileWorld) cases(t *testing.T) []hostileCase {
	t.Helper()
	const (
		acme, globex = "sk_test_acme", "sk_test_globex"
		maxBody      = 1 << 20 // MAX_BODY_BYTES by default
	)
	key := func() []string { return []string{"Idempotency-Key", apptest.NewKey()} }
	order := func(body string, header ...string) apptest.Request {
		return apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders", APIKey: acme, Body: body, Header: append(key(), header...)}
	}
	pay := func(body string, header ...string) apptest.Request {
		return apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/" + h.acmeOrder + "/payments", APIKey: acme, Body: body, Header: append(key(), header...)}
	}
	refund := func(body string, header ...string) apptest.Request {
		return apptest.Request{Method: "POST", URL: h.api.URL + "/v1/payments/" + h.acmePayment + "/refunds", APIKey: acme, Body: body, Header: append(key(), header...)}
	}
	orderKey := func(k ...string) apptest.Request {
		header := []string{}
		for _, v := range k {
			header = append(header, "Idempotency-Key", v)
		}
		return apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders", APIKey: acme, Body: apptest.OrderBody, Header: header}
	}
	get := func(apiKey, path string) apptest.Request {
		return apptest.Request{Method: "GET", URL: h.api.URL + path, APIKey: apiKey}
	}
	auth := func(value string) apptest.Request {
		return apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders", Body: apptest.OrderBody, Header: append(key(), "Authorization", value)}
	}
	address := func(body string, header ...string) apptest.Request {
		return apptest.Request{Method: "PUT", URL: h.api.URL + "/v1/orders/" + h.acmeOrder + "/shipping-address", APIKey: acme, Body: body, Header: header}
	}
	webhook := func(body string, header ...string) apptest.Request {
		return apptest.Request{Method: "POST", URL: h.api.URL + "/v1/webhooks/provider", Body: body, Header: header}
	}
	signed := func(body string) apptest.Request {
		return webhook(body, "Provider-Signature", provider.Sign("whsec_test", time.Now(), []byte(body)))
	}
	event := `{"id":"evt_hostile","type":"charge.succeeded","created":1,"data":{"object":{"id":"ch_x","object":"charge","status":"succeeded","reference":"` + h.acmePayment + `","idempotency_key":"x"}}}`

	huge := strings.Repeat("a", maxBody+1)
	oversized := `{"customer_id":"cus_1","currency":"BRL","items":[],"metadata":{"x":"` + huge + `"}}`
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

	const (
		badRequest = http.StatusBadRequest
		validation = problem.CodeValidationFailed
		keyInvalid = problem.CodeIdempotencyKeyInvalid
	)
	return []hostileCase{
		// Another merchant's data: globex aims at acme's resources.
		{"other merchant: get order", get(globex, "/v1/orders/"+h.acmeOrder), 404, problem.CodeNotFound},
		{"other merchant: get payment", get(globex, "/v1/payments/"+h.acmePayment), 404, problem.CodeNotFound},
		{"other merchant: pay order", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/" + h.acmeOrder + "/payments", APIKey: globex, Body: payBody, Header: key()}, 404, problem.CodeNotFound},
		{"other merchant: refund payment", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/payments/" + h.acmePayment + "/refunds", APIKey: globex, Body: refundBody, Header: key()}, 404, problem.CodeNotFound},
		{"other merchant: add item", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/" + h.acmeOrder + "/items", APIKey: globex, Body: itemBody, Header: key()}, 404, problem.CodeNotFound},
		{"other merchant: set address", apptest.Request{Method: "PUT", URL: h.api.URL + "/v1/orders/" + h.acmeOrder + "/shipping-address", APIKey: globex, Body: addressBody}, 404, problem.CodeNotFound},
		{"other merchant: list after their order", get(globex, "/v1/orders?starting_after="+h.acmeOrder), badRequest, validation},
		{"other merchant: look up their key", get(globex, "/v1/idempotency-keys/"+h.acmePayKey), 404, problem.CodeNotFound},
		// acme's key and acme's exact request, from globex: a fresh
		// operation for globex (here a 404), never acme's stored 201.
		{"other merchant: replay their payment key", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/" + h.acmePaidOrd + "/payments", APIKey: globex, Body: payBody, Header: []string{"Idempotency-Key", h.acmePayKey}}, 404, problem.CodeNotFound},
		{"other merchant: replay their order key on their order", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/" + h.acmeOrder + "/items", APIKey: globex, Body: itemBody, Header: []string{"Idempotency-Key", h.acmeOrderKey}}, 404, problem.CodeNotFound},
		{"id: SQL in the path", get(acme, "/v1/orders/x'%20OR%20'1'='1"), 404, problem.CodeNotFound},
		{"id: NUL in the path", get(acme, "/v1/orders/"+h.acmeOrder+"%00"), 404, problem.CodeNotFound},
		{"id: invalid UTF-8 in the path", get(acme, "/v1/orders/"+h.acmeOrder+"%FF"), 404, problem.CodeNotFound},
		{"id: NUL in a payment's path", get(acme, "/v1/payments/%00"), 404, problem.CodeNotFound},
		{"id: NUL in the path of a payment", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/%00/payments", APIKey: acme, Body: payBody, Header: key()}, 404, problem.CodeNotFound},
		{"id: invalid UTF-8 in the path of a refund", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/payments/%FF/refunds", APIKey: acme, Body: refundBody, Header: key()}, 404, problem.CodeNotFound},
		{"id: NUL in the path of an added item", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/%00/items", APIKey: acme, Body: itemBody, Header: key()}, 404, problem.CodeNotFound},
		{"id: NUL in the path of an address", apptest.Request{Method: "PUT", URL: h.api.URL + "/v1/orders/%00/shipping-address", APIKey: acme, Body: addressBody}, 404, problem.CodeNotFound},
		{"id: very long", get(acme, "/v1/orders/ord_"+strings.Repeat("0", 16<<10)), 404, problem.CodeNotFound},
		{"id: traversal", get(acme, "/v1/orders/..%2Fpayments%2F"+h.acmePayment), 404, problem.CodeNotFound},
		{"id: other resource kind", get(acme, "/v1/payments/"+h.acmeOrder), 404, problem.CodeNotFound},
		{"Method: not routed", apptest.Request{Method: "DELETE", URL: h.api.URL + "/v1/orders/" + h.acmeOrder, APIKey: acme}, 405, problem.CodeMethodNotAllowed},

		// Authentication, before anything else.
		{"auth: none", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders", Body: apptest.OrderBody, Header: key()}, 401, problem.CodeUnauthorized},
		{"auth: scheme only", auth("Bearer"), 401, problem.CodeUnauthorized},
		{"auth: basic", auth("Basic c2tfdGVzdF9hY21lOg=="), 401, problem.CodeUnauthorized},
		{"auth: wrong case", auth("Bearer SK_TEST_ACME"), 401, problem.CodeUnauthorized},
		{"auth: tab inside", auth("Bearer sk_test_acme\tx"), 401, problem.CodeUnauthorized},
		{"auth: non-ASCII", auth("Bearer sk_test_acmé"), 401, problem.CodeUnauthorized},
		{"auth: SQL", auth("Bearer ' OR '1'='1"), 401, problem.CodeUnauthorized},
		{"auth: very long", auth("Bearer " + strings.Repeat("k", 16<<10)), 401, problem.CodeUnauthorized},
		{"auth: repeated header, two merchants", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders", APIKey: acme, Body: apptest.OrderBody, Header: append(key(), "Authorization", "Bearer sk_test_acme", "Authorization", "Bearer sk_test_globex")}, 401, problem.CodeUnauthorized},
		{"auth: unknown key on an oversized body", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders", APIKey: "sk_test_nobody", Body: oversized, Header: key()}, 401, problem.CodeUnauthorized},

		// Idempotency keys.
		{"key: missing", orderKey(), badRequest, problem.CodeIdempotencyKeyMissing},
		{"key: missing on a payment", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/" + h.acmeOrder + "/payments", APIKey: acme, Body: payBody}, badRequest, problem.CodeIdempotencyKeyMissing},
		{"key: empty", orderKey(""), badRequest, keyInvalid},
		{"key: 256 characters", orderKey(strings.Repeat("k", 256)), badRequest, keyInvalid},
		{"key: 16 KiB", orderKey(strings.Repeat("k", 16<<10)), badRequest, keyInvalid},
		{"key: tab inside", orderKey("a\tb"), badRequest, keyInvalid},
		{"key: space inside", orderKey("a b"), badRequest, keyInvalid},
		{"key: non-ASCII", orderKey("clé"), badRequest, keyInvalid},
		{"key: invalid UTF-8", orderKey("a\xffb"), badRequest, keyInvalid},
		{"key: repeated", orderKey("a", "b"), badRequest, keyInvalid},
		{"key: repeated, same value", orderKey("a", "a"), badRequest, keyInvalid},
		{"key: tab inside, on a payment", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/" + h.acmeOrder + "/payments", APIKey: acme, Body: payBody, Header: []string{"Idempotency-Key", "pay\tkey"}}, badRequest, keyInvalid},
		{"key: non-ASCII, on a refund", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/payments/" + h.acmePayment + "/refunds", APIKey: acme, Body: refundBody, Header: []string{"Idempotency-Key", "réfund"}}, badRequest, keyInvalid},
		{"key lookup: NUL", get(acme, "/v1/idempotency-keys/a%00b"), badRequest, keyInvalid},
		{"key lookup: CR LF", get(acme, "/v1/idempotency-keys/a%0D%0AX-Injected:%201"), badRequest, keyInvalid},
		{"key lookup: tab", get(acme, "/v1/idempotency-keys/a%09b"), badRequest, keyInvalid},
		{"key lookup: DEL", get(acme, "/v1/idempotency-keys/a%7Fb"), badRequest, keyInvalid},
		{"key lookup: non-ASCII", get(acme, "/v1/idempotency-keys/cl%C3%A9"), badRequest, keyInvalid},
		{"key lookup: invalid UTF-8", get(acme, "/v1/idempotency-keys/a%FFb"), badRequest, keyInvalid},
		{"key lookup: 256 characters", get(acme, "/v1/idempotency-keys/"+strings.Repeat("k", 256)), badRequest, keyInvalid},
		{"key lookup: empty", get(acme, "/v1/idempotency-keys/"), badRequest, keyInvalid},
		{"key lookup: never used", get(acme, "/v1/idempotency-keys/never-used"), 404, problem.CodeNotFound},

		// Sizes.
		{"size: body over the limit", order(oversized), http.StatusRequestEntityTooLarge, problem.CodeRequestTooLarge},
		{"size: chunked body over the limit", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders", APIKey: acme, Body: oversized, Header: key(), Chunked: true}, http.StatusRequestEntityTooLarge, problem.CodeRequestTooLarge},
		{"size: payment body over the limit", pay(`{"payment_method":"` + huge + `"}`), http.StatusRequestEntityTooLarge, problem.CodeRequestTooLarge},
		{"size: chunked refund body over the limit", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/payments/" + h.acmePayment + "/refunds", APIKey: acme, Body: `{"amount":1` + strings.Repeat("0", maxBody) + `}`, Header: key(), Chunked: true}, http.StatusRequestEntityTooLarge, problem.CodeRequestTooLarge},
		{"size: webhook over the limit", webhook(`{"id":"` + huge + `"}`), http.StatusRequestEntityTooLarge, problem.CodeRequestTooLarge},

		// Malformed JSON.
		{"json: truncated", order(apptest.OrderBody[:len(apptest.OrderBody)/2]), badRequest, validation},
		{"json: empty body", order(""), badRequest, validation},
		{"json: array", order(`[` + apptest.OrderBody + `]`), badRequest, validation},
		{"json: null", order(`null`), badRequest, validation},
		{"json: string", order(`"order"`), badRequest, validation},
		{"json: wrong type, string for integer", order(strings.Replace(apptest.OrderBody, `"quantity":2`, `"quantity":"2"`, 1)), badRequest, validation},
		{"json: wrong type, number for string", order(strings.Replace(apptest.OrderBody, `"cus_1"`, `1`, 1)), badRequest, validation},
		{"json: wrong type, object for array", order(`{"customer_id":"cus_1","currency":"BRL","items":{}}`), badRequest, validation},
		{"json: fraction", order(strings.Replace(apptest.OrderBody, `"quantity":2`, `"quantity":2.5`, 1)), badRequest, validation},
		{"json: unknown field", order(strings.Replace(apptest.OrderBody, `"metadata":{}`, `"metadata":{},"amount_total":1`, 1)), badRequest, validation},
		{"json: duplicate member", order(strings.Replace(apptest.OrderBody, `"currency":"BRL"`, `"currency":"BRL","currency":"USD"`, 1)), badRequest, validation},
		{"json: duplicate member, nested", order(strings.Replace(apptest.OrderBody, `"quantity":2`, `"quantity":2,"quantity":2`, 1)), badRequest, validation},
		{"json: duplicate member, payment", pay(`{"payment_method":"pm_card_visa","payment_method":"pm_card_declined"}`), badRequest, validation},
		{"json: nesting over the parser's limit", order(withMetadata(deep(20000))), badRequest, validation},
		{"json: deep nesting within the limit", order(withMetadata(deep(5000))), badRequest, validation},
		{"json: huge integer", order(strings.Replace(apptest.OrderBody, `"quantity":2`, `"quantity":123456789012345678901234567890`, 1)), badRequest, validation},
		{"json: number beyond float64", order(strings.Replace(apptest.OrderBody, `"quantity":2`, `"quantity":1e400`, 1)), badRequest, validation},
		{"json: astronomic exponent", order(strings.Replace(apptest.OrderBody, `"unit_amount":1250`, `"unit_amount":1e999999999`, 1)), badRequest, validation},
		{"json: 100k digits", order(strings.Replace(apptest.OrderBody, `"unit_amount":1250`, `"unit_amount":1`+strings.Repeat("0", 100000), 1)), badRequest, validation},
		{"json: int64 overflow in a refund", refund(`{"amount":9223372036854775808}`), badRequest, validation},
		{"json: negative refund", refund(`{"amount":-100}`), badRequest, validation},
		{"json: invalid UTF-8", order(strings.Replace(apptest.OrderBody, `"cus_1"`, "\"cus_\xff\"", 1)), badRequest, validation},
		{"json: overlong UTF-8", order(strings.Replace(apptest.OrderBody, `"cus_1"`, "\"cus_\xc0\xaf\"", 1)), badRequest, validation},
		{"json: lone surrogate", order(strings.Replace(apptest.OrderBody, `"cus_1"`, `"cus_\ud800"`, 1)), badRequest, validation},
		{"json: NUL escaped in a string", order(strings.Replace(apptest.OrderBody, `"cus_1"`, `"cus_\u0000"`, 1)), badRequest, validation},
		{"json: byte order mark", order("\xef\xbb\xbf" + apptest.OrderBody), badRequest, validation},
		{"json: trailing garbage", order(apptest.OrderBody + "garbage"), badRequest, validation},
		{"json: second value", order(apptest.OrderBody + apptest.OrderBody), badRequest, validation},
		{"json: trailing NUL", order(apptest.OrderBody + "\x00"), badRequest, validation},
		{"json: truncated payment", pay(`{"payment_method":"pm_card_vi`), badRequest, validation},
		{"json: wrong type, payment", pay(`{"payment_method":1}`), badRequest, validation},
		{"json: control character in payment method", pay(`{"payment_method":"pm_card_visa\r\nX: y"}`), badRequest, validation},
		{"json: wrong type, refund", refund(`{"amount":"100"}`), badRequest, validation},
		{"json: wrong type, item", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/" + h.acmeOrder + "/items", APIKey: acme, Body: `{"sku":"S","name":"N","quantity":true,"unit_amount":1}`, Header: key()}, badRequest, validation},
		{"json: wrong type, address", address(`{"name":["Ada"],"line1":"l","city":"c","country":"BR"}`), badRequest, validation},

		// Content types: a body must be declared as JSON (415, before a key is reserved).
		{"content type: none", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders", APIKey: acme, Body: apptest.OrderBody, Header: append(key(), "Content-Type", "")}, http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: merge patch", order(apptest.OrderBody, "Content-Type", "application/merge-patch+json"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: another charset", order(apptest.OrderBody, "Content-Type", "application/json; charset=utf-16"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: webhook as text", webhook(event, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: text/plain", order(apptest.OrderBody, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: form", order(apptest.OrderBody, "Content-Type", "application/x-www-form-urlencoded"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: multipart", order(apptest.OrderBody, "Content-Type", "multipart/form-data; boundary=x"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: xml", order(apptest.OrderBody, "Content-Type", "application/xml"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: look-alike", order(apptest.OrderBody, "Content-Type", "application/jsonp"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: malformed", order(apptest.OrderBody, "Content-Type", "application/json; ;;=="), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: payment as text", pay(payBody, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: refund as form", refund(refundBody, "Content-Type", "application/x-www-form-urlencoded"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},
		{"content type: address as text", address(addressBody, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType, problem.CodeUnsupportedMediaType},

		// Query parameters.
		{"query: limit not a number", get(acme, "/v1/orders?limit=abc"), badRequest, validation},
		{"query: limit zero", get(acme, "/v1/orders?limit=0"), badRequest, validation},
		{"query: limit negative", get(acme, "/v1/orders?limit=-1"), badRequest, validation},
		{"query: limit too large", get(acme, "/v1/orders?limit=101"), badRequest, validation},
		{"query: limit overflows", get(acme, "/v1/orders?limit=99999999999999999999"), badRequest, validation},
		{"query: limit with a fraction", get(acme, "/v1/orders?limit=1.5"), badRequest, validation},
		{"query: limit with NUL", get(acme, "/v1/orders?limit=1%00"), badRequest, validation},
		{"query: unknown cursor", get(acme, "/v1/orders?starting_after=ord_nope"), badRequest, validation},
		{"query: cursor with invalid UTF-8", get(acme, "/v1/orders?starting_after=%FF"), badRequest, validation},
		{"query: customer with NUL", get(acme, "/v1/orders?customer_id=cus_1%00"), badRequest, validation},
		{"query: customer with invalid UTF-8", get(acme, "/v1/orders?customer_id=%FF"), badRequest, validation},
		{"query: cursor with NUL", get(acme, "/v1/orders?starting_after=%00"), badRequest, validation},

		// If-Match on the one write without a key.
		{"if-match: not quoted", address(addressBody, "If-Match", "1"), badRequest, validation},
		{"if-match: unterminated", address(addressBody, "If-Match", `"1`), badRequest, validation},
		{"if-match: garbage after the tag", address(addressBody, "If-Match", `"1"x`), badRequest, validation},
		{"if-match: tab inside the tag", address(addressBody, "If-Match", "\"1\t\""), badRequest, validation},
		{"if-match: version that overflows", address(addressBody, "If-Match", `"99999999999999999999"`), http.StatusPreconditionFailed, problem.CodeVersionMismatch},
		{"if-match: weak tag", address(addressBody, "If-Match", `W/"1"`), http.StatusPreconditionFailed, problem.CodeVersionMismatch},
		{"if-match: on an added item", apptest.Request{Method: "POST", URL: h.api.URL + "/v1/orders/" + h.acmeOrder + "/items", APIKey: acme, Body: itemBody, Header: append(key(), "If-Match", "1")}, badRequest, validation},

		// The provider's webhook: signed, or nothing.
		{"webhook: unsigned", webhook(event), 401, problem.CodeInvalidSignature},
		{"webhook: garbage signature", webhook(event, "Provider-Signature", "t=1,v1=zz"), 401, problem.CodeInvalidSignature},
		{"webhook: wrong secret", webhook(event, "Provider-Signature", provider.Sign("whsec_guess", time.Now(), []byte(event))), 401, problem.CodeInvalidSignature},
		{"webhook: stale", webhook(event, "Provider-Signature", provider.Sign("whsec_test", time.Now().Add(-10*time.Minute), []byte(event))), 401, problem.CodeInvalidSignature},
		{"webhook: from the future", webhook(event, "Provider-Signature", provider.Sign("whsec_test", time.Now().Add(10*time.Minute), []byte(event))), 401, problem.CodeInvalidSignature},
		{"webhook: signature of another body", webhook(event, "Provider-Signature", provider.Sign("whsec_test", time.Now(), []byte(event+" "))), 401, problem.CodeInvalidSignature},
		{"webhook: huge timestamp", webhook(event, "Provider-Signature", "t=99999999999999999999,v1="+strings.Repeat("0", 64)), 401, problem.CodeInvalidSignature},
		{"webhook: signed garbage", signed(`not json`), badRequest, validation},
		{"webhook: signed truncated event", signed(event[:len(event)/2]), badRequest, validation},
		{"webhook: signed event with trailing garbage", signed(event + "x"), badRequest, validation},
		{"webhook: signed event without an object", signed(`{"id":"evt_1","type":"charge.succeeded","created":1,"data":{"object":"ch_1"}}`), badRequest, validation},
		{"webhook: signed event that contradicts itself", signed(strings.Replace(event, `"status":"succeeded"`, `"status":"declined"`, 1)), badRequest, validation},
		{"webhook: signed event with NUL in its id", signed(strings.Replace(event, `"evt_hostile"`, `"evt_\u0000"`, 1)), badRequest, validation},
		{"webhook: signed event with NUL in the reference", signed(strings.Replace(event, `"reference":"`, `"reference":"\u0000`, 1)), badRequest, validation},
		{"webhook: signed event with invalid UTF-8", signed(strings.Replace(event, `"evt_hostile"`, "\"evt_\xff\"", 1)), badRequest, validation},
		{"webhook: signed event without an id", signed(strings.Replace(event, `"id":"evt_hostile",`, "", 1)), badRequest, validation},
	}
}

// rawHeaderCase puts header, as raw bytes, in the header section of a
// valid order creation.
type rawHeaderCase struct {
	name   string
	header string
	status int
	code   string // "" when net/http answers, not the API
}

// rawHeaderCases are header values an http.Client refuses to send. net/http
// refuses control characters in a header value (NUL, a bare CR, DEL, and all
// of 0x00-0x1F but tab) with its own "400 Bad Request" in text/plain before
// any handler runs, and a header section over 1 MiB with 431. A CR LF or a
// bare LF inside a value is not a character of the value but the end of the
// line: what follows is a header of its own. Injecting a second
// Idempotency-Key that way reaches the API as a repeated header, which it
// refuses; an obsolete line folding (CR LF and a space) reaches it as a
// space inside the key.
func rawHeaderCases() []rawHeaderCase {
	const plain = problem.CodeMalformedRequest // net/http's own 400
	return []rawHeaderCase{
		{"NUL in the key", "Idempotency-Key: a\x00b", http.StatusBadRequest, plain},
		{"bare CR in the key", "Idempotency-Key: a\rb", http.StatusBadRequest, plain},
		{"DEL in the key", "Idempotency-Key: a\x7fb", http.StatusBadRequest, plain},
		{"escape in the key", "Idempotency-Key: a\x1b[2Jb", http.StatusBadRequest, plain},
		{"vertical tab in the key", "Idempotency-Key: a\vb", http.StatusBadRequest, plain},
		{"NUL in the API key", "Idempotency-Key: raw-nul-auth\r\nAuthorization: Bearer sk_test_acme\x00", http.StatusBadRequest, plain},
		{"key over the header limit", "Idempotency-Key: " + strings.Repeat("k", 2<<20), http.StatusRequestHeaderFieldsTooLarge, problem.CodeRequestHeaderTooLarge},
		{"CR LF injects a second key", "Idempotency-Key: raw-crlf\r\nIdempotency-Key: injected", http.StatusBadRequest, problem.CodeIdempotencyKeyInvalid},
		{"bare LF injects a second key", "Idempotency-Key: raw-lf\nIdempotency-Key: injected", http.StatusBadRequest, problem.CodeIdempotencyKeyInvalid},
		{"obsolete line folding", "Idempotency-Key: raw-fold\r\n injected", http.StatusBadRequest, problem.CodeIdempotencyKeyInvalid},
		{"CR LF injects a second API key", "Idempotency-Key: raw-crlf-auth\r\nAuthorization: Bearer sk_test_globex", http.StatusUnauthorized, problem.CodeUnauthorized},
	}
}

// rawOrderRequest is POST /v1/orders as acme with a valid body, with header
// added to its header section as it is.
func rawOrderRequest(header string) string {
	return fmt.Sprintf("POST /v1/orders HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer sk_test_acme\r\n"+
		"Content-Type: application/json\r\n%s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		header, len(apptest.OrderBody), apptest.OrderBody)
}
