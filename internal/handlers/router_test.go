package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
	"github.com/idemkeys/payments/internal/problem"
	"github.com/idemkeys/payments/internal/testkit"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

const (
	acmeKey   = "sk_test_acme"
	globexKey = "sk_test_globex"
	maxBody   = 4096
	orderBody = `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"SKU-1","name":"Coffee","quantity":2,"unit_amount":1250}],"metadata":{}}`
)

// passThrough stands in for the idempotency middleware.
// passThrough serves a keyed route's handler without the idempotency layer.
// passThroughGuarded is passThrough for a Guarded route: no operation owns
// a record there.
func passThroughGuarded(h ginidem.GuardedHandler) gin.HandlerFunc {
	return passThrough(func(c *gin.Context) (idempotency.Answer, error) { return h(c, nil) })
}

func passThrough(h ginidem.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		a, err := h(c)
		if err != nil {
			handlers.RenderError(c, err)
			return
		}
		ginidem.Write(c, a)
	}
}

type api struct {
	t      *testing.T
	db     *database.DB
	router *gin.Engine
}

// newAPI serves the real router over a fresh database of the dialect, with
// the demo merchants seeded. idempotent replaces Deps.Atomic
// (passThrough when nil).
func newAPI(t *testing.T, dialect database.Dialect, idempotent func(ginidem.Handler) gin.HandlerFunc) *api {
	t.Helper()
	db := testkit.OpenDB(t, dialect)
	ms := merchants.NewStore(db.DB, nil)
	require.NoError(t, ms.SeedDemo(context.Background()))
	if idempotent == nil {
		idempotent = passThrough
	}
	r := handlers.NewRouter(handlers.Deps{
		Log:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		Auth:         ms,
		Orders:       payments.NewService(paymentsdb.New(db.DB), nil),
		Atomic:       idempotent,
		Database:     db,
		MaxBodyBytes: maxBody,
	})
	return &api{t: t, db: db, router: r}
}

// do sends a request with the API key (none when key is "").
func (a *api) do(method, path, key, body string, header ...string) *httptest.ResponseRecorder {
	a.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if method == http.MethodPost {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("k-%d", time.Now().UnixNano()))
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	a.router.ServeHTTP(w, req)
	return w
}

func (a *api) orders() int64 {
	a.t.Helper()
	var n int64
	require.NoError(a.t, a.db.Raw("SELECT COUNT(*) FROM orders").Scan(&n).Error)
	return n
}

// requireProblem checks the shape every error answer shares and returns it.
func requireProblem(t *testing.T, w *httptest.ResponseRecorder, status int, code string) problem.Problem {
	t.Helper()
	testkit.RequireProblem(t, w.Code, w.Header(), w.Body.Bytes(), status, code)
	var p problem.Problem
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	return p
}

func TestCreateAndGetOrder(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, d, nil)

			w := a.do(http.MethodPost, "/v1/orders", acmeKey, orderBody)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			require.Equal(t, "application/json", w.Header().Get("Content-Type"))
			require.NotEmpty(t, w.Header().Get("X-Request-Id"))

			var got map[string]any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
			id, _ := got["id"].(string)
			require.True(t, strings.HasPrefix(id, "ord_"), id)
			require.Equal(t, "/v1/orders/"+id, w.Header().Get("Location"))
			createdAt, err := time.Parse(time.RFC3339Nano, got["created_at"].(string))
			require.NoError(t, err)
			require.Equal(t, time.UTC, createdAt.Location())
			require.WithinDuration(t, time.Now(), createdAt, time.Minute)
			delete(got, "id")
			delete(got, "created_at")
			require.Equal(t, map[string]any{
				"object": "order", "customer_id": "cus_1", "currency": "BRL",
				"items":        []any{map[string]any{"sku": "SKU-1", "name": "Coffee", "quantity": 2.0, "unit_amount": 1250.0}},
				"amount_total": 2500.0, "status": "pending_payment", "metadata": map[string]any{},
				"shipping_address": nil, "version": 1.0,
			}, got)
			require.Equal(t, int64(1), a.orders())

			t.Run("get answers the same order", func(t *testing.T) {
				g := a.do(http.MethodGet, w.Header().Get("Location"), acmeKey, "")
				require.Equal(t, http.StatusOK, g.Code)
				require.JSONEq(t, w.Body.String(), g.Body.String())
			})
			t.Run("another merchant's order is not found", func(t *testing.T) {
				g := a.do(http.MethodGet, "/v1/orders/"+id, globexKey, "")
				requireProblem(t, g, http.StatusNotFound, "not_found")
			})
			t.Run("unknown id", func(t *testing.T) {
				requireProblem(t, a.do(http.MethodGet, "/v1/orders/ord_nope", acmeKey, ""), http.StatusNotFound, "not_found")
			})
			t.Run("whole numbers in any spelling", func(t *testing.T) {
				w := a.do(http.MethodPost, "/v1/orders", acmeKey,
					`{"customer_id":"cus_2","currency":"USD","items":[{"sku":"S","name":"N","quantity":2.0,"unit_amount":125e1}]}`)
				require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
				require.Contains(t, w.Body.String(), `"amount_total":2500`)
				require.Contains(t, w.Body.String(), `"metadata":{}`)
			})
		})
	}
}

func TestCreateOrderPassesTheRequestContext(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			// Like the idempotency Keeper: a transaction in the request's
			// context, which this one rolls back after the handler.
			var a *api
			errRollback := errors.New("rolled back by the test")
			rollback := func(h ginidem.Handler) gin.HandlerFunc {
				return passThrough(func(c *gin.Context) (answer idempotency.Answer, err error) {
					base := c.Request.Context()
					txErr := dbtx.Transaction(base, a.db.DB, func(ctx context.Context) error {
						c.Request = c.Request.WithContext(ctx)
						answer, err = h(c)
						return errRollback
					})
					c.Request = c.Request.WithContext(base)
					require.ErrorIs(t, txErr, errRollback)
					return answer, err
				})
			}
			a = newAPI(t, d, rollback)

			w := a.do(http.MethodPost, "/v1/orders", acmeKey, orderBody)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			require.Zero(t, a.orders(), "the order was written in the middleware's transaction")
		})
	}
}

func TestAuthComesFirst(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, d, func(h ginidem.Handler) gin.HandlerFunc {
				return passThrough(func(c *gin.Context) (idempotency.Answer, error) {
					require.NotEmpty(t, handlers.MerchantID(c), "the idempotency middleware always knows the merchant")
					return h(c)
				})
			})
			huge := strings.Repeat("x", maxBody+1)
			tests := []struct {
				name, method, path, auth, body string
			}{
				{"no header, invalid body", http.MethodPost, "/v1/orders", "", `{"nope":1}`},
				{"no header, oversized body", http.MethodPost, "/v1/orders", "", huge},
				{"wrong key", http.MethodPost, "/v1/orders", "Bearer sk_test_nobody", orderBody},
				{"not Bearer", http.MethodPost, "/v1/orders", "Basic " + acmeKey, orderBody},
				{"Bearer without a key", http.MethodGet, "/v1/orders", "Bearer ", ""},
				{"get", http.MethodGet, "/v1/orders/ord_1", "", ""},
				{"list with a bad limit", http.MethodGet, "/v1/orders?limit=abc", "", ""},
				{"unknown /v1 path", http.MethodGet, "/v1/nothing-here", "", ""},
				{"a method the path is not served with", http.MethodDelete, "/v1/orders", "", ""},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					w := a.do(tt.method, tt.path, "", tt.body, "Authorization", tt.auth)
					requireProblem(t, w, http.StatusUnauthorized, "unauthorized")
					require.Equal(t, `Bearer realm="api"`, w.Header().Get("WWW-Authenticate"))
					require.Empty(t, w.Header().Get("Allow"), "without a key, nothing about the path")
				})
			}
			require.Zero(t, a.orders())

			t.Run("the scheme is case-insensitive", func(t *testing.T) {
				w := a.do(http.MethodGet, "/v1/orders", "", "", "Authorization", "bearer "+acmeKey)
				require.Equal(t, http.StatusOK, w.Code)
			})
		})
	}
}

// TestMethodNotAllowed: a method a path's routes do not serve is 405
// method_not_allowed with Allow listing those they serve (after the API
// key under /v1); a path no route serves stays 404 whatever the method.
func TestMethodNotAllowed(t *testing.T) {
	a := newAPI(t, database.SQLite, nil)
	for _, tt := range []struct {
		method, path, key, allow string
	}{
		{http.MethodDelete, "/v1/orders", acmeKey, "GET, POST"},
		{http.MethodPatch, "/v1/orders/ord_1", acmeKey, "GET"},
		{http.MethodGet, "/v1/orders/ord_1/items", acmeKey, "POST"},
		{http.MethodPost, "/v1/orders/ord_1/shipping-address", acmeKey, "PUT"},
		{http.MethodOptions, "/v1/orders", acmeKey, "GET, POST"},
		{http.MethodPost, "/healthz", "", "GET"},
		{http.MethodHead, "/readyz", "", "GET"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := a.do(tt.method, tt.path, tt.key, "")
			require.Equal(t, tt.allow, w.Header().Get("Allow"))
			if tt.method == http.MethodHead {
				require.Equal(t, http.StatusMethodNotAllowed, w.Code)
				return
			}
			p := requireProblem(t, w, http.StatusMethodNotAllowed, "method_not_allowed")
			require.Contains(t, p.Detail, tt.allow)
		})
	}
	t.Run("an unknown path stays 404", func(t *testing.T) {
		w := a.do(http.MethodDelete, "/v1/nothing-here", acmeKey, "")
		requireProblem(t, w, http.StatusNotFound, "not_found")
		require.Empty(t, w.Header().Get("Allow"))
	})
}

func TestBodyLimit(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, d, nil)
			huge := `{"customer_id":"` + strings.Repeat("c", maxBody) + `"}`

			t.Run("by Content-Length, unread", func(t *testing.T) {
				p := requireProblem(t, a.do(http.MethodPost, "/v1/orders", acmeKey, huge), http.StatusRequestEntityTooLarge, "request_too_large")
				require.Contains(t, p.Detail, "4096")
			})
			t.Run("chunked, cut while reading", func(t *testing.T) {
				req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(huge))
				req.ContentLength = -1 // unknown, as with Transfer-Encoding: chunked
				req.Header.Set("Authorization", "Bearer "+acmeKey)
				req.Header.Set("Idempotency-Key", "chunked")
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				a.router.ServeHTTP(w, req)
				requireProblem(t, w, http.StatusRequestEntityTooLarge, "request_too_large")
			})
			t.Run("exactly at the limit is fine", func(t *testing.T) {
				body := orderBody + strings.Repeat(" ", maxBody-len(orderBody))
				require.Len(t, body, maxBody)
				w := a.do(http.MethodPost, "/v1/orders", acmeKey, body)
				require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			})
			require.Equal(t, int64(1), a.orders())
		})
	}
}

func TestCreateOrderValidation(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, d, nil)
			tests := []struct {
				name   string
				body   string
				fields []problem.FieldError // nil: a detail-only problem
			}{
				{name: "malformed JSON", body: `{"customer_id": "cus_1",`},
				{name: "not an object", body: `["cus_1"]`},
				{name: "empty body is an empty order", body: ``, fields: []problem.FieldError{
					{Field: "currency", Message: "is required"},
					{Field: "customer_id", Message: "is required"},
					{Field: "items", Message: "is required"},
				}},
				{name: "an item without unit_amount is not free", body: `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"S","name":"N","quantity":1}]}`,
					fields: []problem.FieldError{{Field: "items[0].unit_amount", Message: "is required"}}},
				{name: "null where the schema has no null", body: `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"S","name":"N","quantity":1,"unit_amount":1}],"metadata":null}`,
					fields: []problem.FieldError{{Field: "metadata", Message: "must not be null"}}},
				{name: "unknown field", body: `{"customer_id":"cus_1","currency":"BRL","items":[],"coupon":"X"}`,
					fields: []problem.FieldError{{Field: "coupon", Message: "is not a known field"}}},
				{name: "wrong types, by full path", body: `{"customer_id":"cus_1","currency":"BRL","items":[{"sku":"S","name":"N","quantity":"2","unit_amount":1}]}`,
					fields: []problem.FieldError{{Field: "items[0].quantity", Message: "must be an integer"}}},
				{name: "domain rules", body: `{"customer_id":"cus 1","currency":"XXX","items":[{"sku":"S","name":"N","quantity":0,"unit_amount":1}],"metadata":{"k":""}}`,
					fields: []problem.FieldError{
						{Field: "customer_id", Message: "must contain only visible ASCII characters"},
						{Field: "currency", Message: "is not an active ISO 4217 currency code"},
						{Field: "items[0].quantity", Message: "must be between 1 and 10000"},
					}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					p := requireProblem(t, a.do(http.MethodPost, "/v1/orders", acmeKey, tt.body), http.StatusBadRequest, "validation_failed")
					require.Equal(t, tt.fields, p.Errors)
				})
			}
			require.Zero(t, a.orders())
		})
	}
}

func TestListOrders(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, d, nil)
			var ids []string // newest first
			for i := range 5 {
				body := strings.Replace(orderBody, "cus_1", fmt.Sprintf("cus_%d", i%2), 1)
				w := a.do(http.MethodPost, "/v1/orders", acmeKey, body)
				require.Equal(t, http.StatusCreated, w.Code)
				var o handlers.OrderResponse
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &o))
				ids = append([]string{o.ID}, ids...)
			}
			list := func(key, query string) handlers.OrderList {
				t.Helper()
				w := a.do(http.MethodGet, "/v1/orders"+query, key, "")
				require.Equal(t, http.StatusOK, w.Code, w.Body.String())
				var l handlers.OrderList
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &l))
				require.Equal(t, "list", l.Object)
				require.NotNil(t, l.Data, "data is [] when empty, never null")
				return l
			}
			idsOf := func(l handlers.OrderList) []string {
				var out []string
				for _, o := range l.Data {
					out = append(out, o.ID)
				}
				return out
			}

			first := list(acmeKey, "?limit=2")
			require.Equal(t, ids[:2], idsOf(first))
			require.True(t, first.HasMore)
			second := list(acmeKey, "?limit=2&starting_after="+ids[1])
			require.Equal(t, ids[2:4], idsOf(second))
			require.True(t, second.HasMore)
			last := list(acmeKey, "?limit=2&starting_after="+ids[3])
			require.Equal(t, ids[4:], idsOf(last))
			require.False(t, last.HasMore)

			all := list(acmeKey, "")
			require.Equal(t, ids, idsOf(all))
			require.False(t, all.HasMore)

			cus1 := list(acmeKey, "?customer_id=cus_1")
			require.Equal(t, []string{ids[1], ids[3]}, idsOf(cus1))

			empty := list(globexKey, "")
			require.Empty(t, empty.Data)
			require.False(t, empty.HasMore)

			bad := []struct{ query, field string }{
				{"?limit=abc", "limit"},
				{"?limit=0", "limit"},
				{"?limit=-1", "limit"},
				{"?limit=101", "limit"},
				{"?limit=", "limit"},
				{"?starting_after=ord_nope", "starting_after"},
			}
			for _, tt := range bad {
				t.Run(tt.query, func(t *testing.T) {
					p := requireProblem(t, a.do(http.MethodGet, "/v1/orders"+tt.query, acmeKey, ""), http.StatusBadRequest, "validation_failed")
					require.Len(t, p.Errors, 1)
					require.Equal(t, tt.field, p.Errors[0].Field)
				})
			}
			t.Run("another merchant's id is no cursor", func(t *testing.T) {
				p := requireProblem(t, a.do(http.MethodGet, "/v1/orders?starting_after="+ids[0], globexKey, ""), http.StatusBadRequest, "validation_failed")
				require.Equal(t, "starting_after", p.Errors[0].Field)
			})
		})
	}
}

func TestDatabaseDown(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, d, nil)
			// Authenticate once, so the key is cached, then lose the database.
			require.Equal(t, http.StatusOK, a.do(http.MethodGet, "/v1/orders", acmeKey, "").Code)
			require.NoError(t, a.db.Close())

			w := a.do(http.MethodPost, "/v1/orders", acmeKey, orderBody)
			requireProblem(t, w, http.StatusServiceUnavailable, "service_unavailable")
			require.Equal(t, "1", w.Header().Get("Retry-After"))
			require.NotContains(t, w.Body.String(), "sql:")

			t.Run("an uncached key cannot be judged either", func(t *testing.T) {
				requireProblem(t, a.do(http.MethodGet, "/v1/orders", globexKey, ""), http.StatusServiceUnavailable, "service_unavailable")
			})
		})
	}
}

func TestRoutesAndRecovery(t *testing.T) {
	a := newAPI(t, database.SQLite, func(h ginidem.Handler) gin.HandlerFunc {
		return passThrough(func(c *gin.Context) (idempotency.Answer, error) {
			if c.GetHeader("X-Panic") != "" {
				panic("boom: secret detail")
			}
			return h(c)
		})
	})

	t.Run("a panic is a 500 problem", func(t *testing.T) {
		w := a.do(http.MethodPost, "/v1/orders", acmeKey, orderBody, "X-Panic", "1")
		requireProblem(t, w, http.StatusInternalServerError, "internal_error")
		require.NotContains(t, w.Body.String(), "secret")
	})
	t.Run("unknown path outside /v1 needs no key", func(t *testing.T) {
		requireProblem(t, a.do(http.MethodGet, "/nothing", "", ""), http.StatusNotFound, "not_found")
	})
	t.Run("unknown path under /v1 with a key", func(t *testing.T) {
		requireProblem(t, a.do(http.MethodGet, "/v1/nothing", acmeKey, ""), http.StatusNotFound, "not_found")
	})
	t.Run("the request id is echoed when sane", func(t *testing.T) {
		w := a.do(http.MethodGet, "/healthz", "", "", "X-Request-Id", "req-123")
		require.Equal(t, "req-123", w.Header().Get("X-Request-Id"))
		w = a.do(http.MethodGet, "/healthz", "", "", "X-Request-Id", "bad id\r")
		require.NotEqual(t, "bad id\r", w.Header().Get("X-Request-Id"))
		require.Len(t, w.Header().Get("X-Request-Id"), 16)
	})
}

func TestProbes(t *testing.T) {
	up := handlers.PingerFunc(func(context.Context) error { return nil })
	down := handlers.PingerFunc(func(context.Context) error { return errors.New("connection refused") })
	tests := []struct {
		name     string
		db       handlers.Pinger
		redis    handlers.Pinger
		sink     string
		nats     handlers.Pinger
		breakers int
		status   int
		response string
	}{
		{"all up, no redis", up, nil, "", nil, 0, 200, `{"status":"ok","checks":{"database":"up","redis":"off","outbox":"log","nats":"off","provider_breaker":"closed"}}`},
		{"all up", up, up, handlers.OutboxRedis, nil, 0, 200, `{"status":"ok","checks":{"database":"up","redis":"up","outbox":"redis","nats":"off","provider_breaker":"closed"}}`},
		{"redis down is degraded, still serving", up, down, handlers.OutboxRedis, nil, 0, 200, `{"status":"degraded","checks":{"database":"up","redis":"down","outbox":"redis","nats":"off","provider_breaker":"closed"}}`},
		{"database down", down, nil, "", nil, 0, 503, `{"status":"degraded","checks":{"database":"down","redis":"off","outbox":"log","nats":"off","provider_breaker":"closed"}}`},
		{"both down", down, down, handlers.OutboxRedis, nil, 0, 503, `{"status":"degraded","checks":{"database":"down","redis":"down","outbox":"redis","nats":"off","provider_breaker":"closed"}}`},
		{"nats up", up, nil, handlers.OutboxNATS, up, 0, 200, `{"status":"ok","checks":{"database":"up","redis":"off","outbox":"nats","nats":"up","provider_breaker":"closed"}}`},
		{"nats down is degraded, still serving", up, up, handlers.OutboxNATS, down, 0, 200, `{"status":"degraded","checks":{"database":"up","redis":"up","outbox":"nats","nats":"down","provider_breaker":"closed"}}`},
		{"database and nats down", down, nil, handlers.OutboxNATS, down, 0, 503, `{"status":"degraded","checks":{"database":"down","redis":"off","outbox":"nats","nats":"down","provider_breaker":"closed"}}`},
		{"a provider breaker open is degraded, still serving", up, nil, "", nil, 1, 200, `{"status":"degraded","checks":{"database":"up","redis":"off","outbox":"log","nats":"off","provider_breaker":"open"}}`},
		{"database down and a breaker open", down, nil, "", nil, 2, 503, `{"status":"degraded","checks":{"database":"down","redis":"off","outbox":"log","nats":"off","provider_breaker":"open"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := handlers.NewRouter(handlers.Deps{
				Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
				Auth:   authFunc(func(context.Context, string) (string, error) { return "", merchants.ErrUnauthorized }),
				Orders: payments.NewService(nil, nil), Atomic: passThrough,
				Database: tt.db, Redis: tt.redis, OutboxSink: tt.sink, NATS: tt.nats,
				ProviderBreakers: func() int { return tt.breakers },
			})
			for path, want := range map[string]struct {
				status int
				body   string
			}{
				"/readyz":  {tt.status, tt.response},
				"/healthz": {200, `{"status":"ok"}`},
			} {
				w := httptest.NewRecorder()
				r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
				require.Equal(t, want.status, w.Code, path)
				require.JSONEq(t, want.body, w.Body.String(), path)
			}
		})
	}
}

type authFunc func(ctx context.Context, key string) (string, error)

func (f authFunc) Authenticate(ctx context.Context, key string) (string, error) { return f(ctx, key) }
