package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
)

// noCustomers is a CustomerService for tests that never reach the use case.
type noCustomers struct{ handlers.CustomerService }

// TestBodiesMustBeDeclaredJSON: every operation of the document that takes
// a body refuses one whose Content-Type is missing or not application/json
// with 415, before the idempotency middleware (a key is never reserved for
// it) and before the webhook's signature; application/json, alone or with
// charset=utf-8, gets through, and so does a request without a body.
func TestBodiesMustBeDeclaredJSON(t *testing.T) {
	var reached atomic.Int64
	keeper := func(ginidem.Handler) gin.HandlerFunc {
		return func(c *gin.Context) { reached.Add(1); c.AbortWithStatus(http.StatusTeapot) }
	}
	r := handlers.NewRouter(handlers.Deps{
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Auth:      authFunc(func(context.Context, string) (string, error) { return "mer_acme", nil }),
		Orders:    noOrders{},
		Customers: noCustomers{},
		Payments:  &fakePayments{},
		Atomic:    keeper,
		Guarded:   func(h ginidem.GuardedHandler) gin.HandlerFunc { return keeper(nil) },
		VerifyWebhook: func(string, []byte) error {
			reached.Add(1)
			return io.EOF // refused: 401 once the type is right
		},
		Database:     handlers.PingerFunc(func(context.Context) error { return nil }),
		MaxBodyBytes: maxBody,
	})

	doc := loadSpec(t)
	var withBody []string
	for _, path := range slices.Sorted(maps.Keys(doc.Paths)) {
		for method, op := range doc.Paths[path] {
			if op.RequestBody != nil {
				require.Equal(t, []string{"application/json"}, slices.Collect(maps.Keys(op.RequestBody.Content)), "%s %s", method, path)
				withBody = append(withBody, strings.ToUpper(method)+" "+strings.ReplaceAll(path, "{id}", "x1"))
			}
		}
	}
	require.Len(t, withBody, 7, "orders, items, shipping address, customers, payments, refunds, the webhook")

	header := func(contentType []string) []string {
		h := []string{"Authorization", "Bearer " + acmeKey, "Idempotency-Key", "k1"}
		for _, v := range contentType {
			h = append(h, "Content-Type", v)
		}
		return h
	}
	for _, route := range withBody {
		method, path, _ := strings.Cut(route, " ")
		t.Run(route, func(t *testing.T) {
			for _, refused := range [][]string{
				nil, {""}, {"text/plain"}, {"application/x-www-form-urlencoded"}, {"application/merge-patch+json"},
				{"application/problem+json"}, {"application/json; charset=latin1"}, {"application/json; v=2"},
				{"application/json", "application/json"},
			} {
				before := reached.Load()
				w := sendHeaders(r, method, path, `{}`, header(refused))
				requireProblem(t, w, http.StatusUnsupportedMediaType, "unsupported_media_type")
				require.Equal(t, before, reached.Load(), "%q reached the idempotency middleware or the signature check", refused)
			}
			for _, accepted := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;Charset=UTF-8", "application/json;"} {
				w := sendHeaders(r, method, path, `{}`, header([]string{accepted}))
				require.NotEqual(t, http.StatusUnsupportedMediaType, w.Code, accepted)
			}
			w := sendHeaders(r, method, path, ``, header(nil))
			require.NotEqual(t, http.StatusUnsupportedMediaType, w.Code, "no body needs no type")
		})
	}
}

// sendHeaders serves one request with exactly the headers given (name,
// value pairs; a name repeated is sent twice).
func sendHeaders(r http.Handler, method, path, body string, header []string) *httptest.ResponseRecorder {
	var b io.Reader
	if body != "" {
		b = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, b)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w
}
