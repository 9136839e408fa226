package handlers_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
	"github.com/idemkeys/payments/internal/testkit"
)

// customersAPI is the router with the real idempotency layer and service
// over a real database: the customers endpoint as the API serves it.
type customersAPI struct {
	router *gin.Engine
	db     *database.DB
}

func newCustomersAPI(t *testing.T, dialect database.Dialect) *customersAPI {
	t.Helper()
	db := testkit.OpenDB(t, dialect)
	ms := merchants.NewStore(db.DB, nil)
	require.NoError(t, ms.SeedDemo(t.Context()))
	_, idem, _ := newIdempotency(t, db.DB, idempotency.Config{Wait: 10 * time.Second}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	store := paymentsdb.New(db.DB)
	svc := payments.NewService(store, nil, payments.WithCustomers(store), payments.WithEvents(store))
	r := handlers.NewRouter(handlers.Deps{
		Auth: ms, Orders: svc, Customers: svc, Atomic: idem.Atomic, Database: db,
	})
	return &customersAPI{router: r, db: db}
}

func (a *customersAPI) do(method, path, apiKey, idemKey, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	a.router.ServeHTTP(w, req)
	return w
}

func (a *customersAPI) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, a.db.Raw(query, args...).Scan(&n).Error)
	return n
}

func problemCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var p struct {
		Code string `json:"code"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), w.Body.String())
	return p.Code
}

// TestCustomersEndpoint is a fork's first endpoint with a natural unique key,
// proved on both dialects: replays, the 422 and the kept 409 stay right
// although the clash aborts the transaction on PostgreSQL, and so does a
// storm of identical requests.
func TestCustomersEndpoint(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			a := newCustomersAPI(t, d)
			customers := func() int64 { return a.count(t, "SELECT count(*) FROM customers") }
			events := func() int64 {
				return a.count(t, "SELECT count(*) FROM outbox_events WHERE type = ?", payments.EventCustomerCreated)
			}

			spaced := a.do(http.MethodPost, "/v1/customers", acmeKey, "cus-0", `{"email":" ada@example.com ","name":"Ada"}`)
			require.Equal(t, http.StatusBadRequest, spaced.Code, "an address is taken as sent, not trimmed")
			created := a.do(http.MethodPost, "/v1/customers", acmeKey, "cus-1", `{"email":"Ada@Example.COM","name":"Ada"}`)
			require.Equal(t, http.StatusCreated, created.Code, created.Body.String())
			var cu handlers.CustomerResponse
			require.NoError(t, json.Unmarshal(created.Body.Bytes(), &cu))
			require.True(t, strings.HasPrefix(cu.ID, "cus_"), cu.ID)
			require.Equal(t, "customer", cu.Object)
			require.Equal(t, "ada@example.com", cu.Email, "folded in Go, alike on both dialects")
			require.Equal(t, "/v1/customers/"+cu.ID, created.Header().Get("Location"))
			require.EqualValues(t, 1, customers())
			require.EqualValues(t, 1, events(), "the customer.created event commits with the customer")

			replay := a.do(http.MethodPost, "/v1/customers", acmeKey, "cus-1", `{"name":"Ada","email":"Ada@Example.COM"}`)
			require.Equal(t, http.StatusCreated, replay.Code, replay.Body.String())
			require.Equal(t, "true", replay.Header().Get(ginidem.HeaderReplayed))
			require.Equal(t, created.Body.String(), replay.Body.String())
			require.Equal(t, created.Header().Get("Location"), replay.Header().Get("Location"))

			reused := a.do(http.MethodPost, "/v1/customers", acmeKey, "cus-1", `{"email":"grace@example.com","name":"Grace"}`)
			require.Equal(t, http.StatusUnprocessableEntity, reused.Code, reused.Body.String())
			require.Equal(t, "idempotency_key_reused", problemCode(t, reused))

			exists := a.do(http.MethodPost, "/v1/customers", acmeKey, "cus-2", `{"email":"ADA@example.com","name":"Ada again"}`)
			require.Equal(t, http.StatusConflict, exists.Code, exists.Body.String())
			require.Equal(t, "customer_exists", problemCode(t, exists))
			require.Empty(t, exists.Header().Get(ginidem.HeaderReplayed))
			kept := a.do(http.MethodPost, "/v1/customers", acmeKey, "cus-2", `{"email":"ADA@example.com","name":"Ada again"}`)
			require.Equal(t, http.StatusConflict, kept.Code, kept.Body.String())
			require.Equal(t, "true", kept.Header().Get(ginidem.HeaderReplayed), "customer_exists is stored")
			require.Equal(t, exists.Body.String(), kept.Body.String())
			require.Equal(t, http.StatusUnprocessableEntity,
				a.do(http.MethodPost, "/v1/customers", acmeKey, "cus-2", `{"email":"linus@example.com","name":"Linus"}`).Code)
			require.EqualValues(t, 1, customers())
			require.EqualValues(t, 1, events())

			// Another merchant has customers of its own, under the same key
			// and email.
			other := a.do(http.MethodPost, "/v1/customers", globexKey, "cus-1", `{"email":"ada@example.com","name":"Ada"}`)
			require.Equal(t, http.StatusCreated, other.Code, other.Body.String())
			require.Empty(t, other.Header().Get(ginidem.HeaderReplayed))
			require.Equal(t, http.StatusNotFound, a.do(http.MethodGet, "/v1/customers/"+cu.ID, globexKey, "", "").Code)

			got := a.do(http.MethodGet, "/v1/customers/"+cu.ID, acmeKey, "", "")
			require.Equal(t, http.StatusOK, got.Code, got.Body.String())
			require.JSONEq(t, created.Body.String(), got.Body.String())

			t.Run("thirty identical requests at once", func(t *testing.T) {
				const n = 30
				var wg sync.WaitGroup
				codes, bodies := make([]int, n), make([]string, n)
				for i := range n {
					wg.Go(func() {
						w := a.do(http.MethodPost, "/v1/customers", acmeKey, "cus-storm", `{"email":"storm@example.com","name":"Storm"}`)
						codes[i], bodies[i] = w.Code, w.Body.String()
					})
				}
				wg.Wait()
				for i := range n {
					require.Equal(t, http.StatusCreated, codes[i], bodies[i])
					require.Equal(t, bodies[0], bodies[i], "one customer, one answer")
				}
				require.EqualValues(t, 1, a.count(t, "SELECT count(*) FROM customers WHERE email = 'storm@example.com'"))
			})

			t.Run("thirty keys for one email: one customer, twenty-nine kept 409s", func(t *testing.T) {
				const n = 30
				var wg sync.WaitGroup
				codes := make([]int, n)
				for i := range n {
					wg.Go(func() {
						w := a.do(http.MethodPost, "/v1/customers", acmeKey, "cus-race-"+string(rune('a'+i)), `{"email":"race@example.com","name":"Race"}`)
						codes[i] = w.Code
					})
				}
				wg.Wait()
				created, conflicts := 0, 0
				for _, c := range codes {
					switch c {
					case http.StatusCreated:
						created++
					case http.StatusConflict:
						conflicts++
					}
				}
				require.Equal(t, 1, created, "%v", codes)
				require.Equal(t, n-1, conflicts, "%v", codes)
				require.EqualValues(t, 1, a.count(t, "SELECT count(*) FROM customers WHERE email = 'race@example.com'"))
			})

			t.Run("bad input changes nothing", func(t *testing.T) {
				before := customers()
				for i, body := range []string{
					`{"email":"","name":"x"}`, `{"email":"not-an-email","name":"x"}`, `{"email":"a b@example.com","name":"x"}`,
					`{"email":"a@example.com","name":""}`, `{"email":"a@example.com"}`, `{"email":"a@example.com","name":"x","extra":1}`,
				} {
					w := a.do(http.MethodPost, "/v1/customers", acmeKey, "cus-bad-"+strconv.Itoa(i), body)
					require.Equal(t, http.StatusBadRequest, w.Code, body)
					require.Equal(t, "validation_failed", problemCode(t, w), body)
				}
				require.Equal(t, before, customers())
			})
		})
	}
}
