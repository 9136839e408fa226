package handlers_test

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
	"github.com/idemkeys/payments/internal/testkit"
)

// keysAPI is the router with the real Keeper (orders behind Atomic) and the
// key introspection route, logging JSON into logs.
type keysAPI struct {
	router   *gin.Engine
	store    idempotency.Store
	logs     *testkit.SyncBuffer
	hash     func(string) string
	merchant string // acme's id
}

func newKeysAPI(t *testing.T, dialect database.Dialect) *keysAPI {
	t.Helper()
	return newKeysAPIWith(t, dialect, slog.LevelDebug, handlers.NewKeyHasher([]byte("a-log-secret-for-tests")))
}

// newKeysAPIWith is newKeysAPI logging from level up, hashing keys for the
// log with hash.
func newKeysAPIWith(t *testing.T, dialect database.Dialect, level slog.Level, hash func(string) string) *keysAPI {
	t.Helper()
	db := testkit.OpenDB(t, dialect)
	ms := merchants.NewStore(db.DB, nil)
	require.NoError(t, ms.SeedDemo(t.Context()))
	merchantID, err := ms.Authenticate(t.Context(), acmeKey)
	require.NoError(t, err)
	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level}))
	_, idem, store := newIdempotency(t, db.DB, idempotency.Config{
		TTL: time.Hour, LockTimeout: time.Minute, Wait: 500 * time.Millisecond, MaxBodyBytes: maxBody,
	}, log)
	r := handlers.NewRouter(handlers.Deps{
		Log:             log,
		Auth:            ms,
		Orders:          payments.NewService(paymentsdb.New(db.DB), nil),
		Atomic:          idem.Atomic,
		IdempotencyKeys: store,
		HashKey:         hash,
		Database:        db,
		MaxBodyBytes:    maxBody,
	})
	return &keysAPI{router: r, store: store, logs: logs, hash: hash, merchant: merchantID}
}

func (a *keysAPI) do(method, path, apiKey, idemKey, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	a.router.ServeHTTP(w, req)
	return w
}

func TestIdempotencyKeyIntrospection(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			a := newKeysAPI(t, d)
			// Every visible ASCII character is a valid key character, '/'
			// and '%' included: the URL carries them percent-encoded.
			const key = "order/2025%06-01#a?b"
			const escaped = "order%2F2025%2506-01%23a%3Fb"
			created := a.do(http.MethodPost, "/v1/orders", acmeKey, key, orderBody)
			require.Equal(t, http.StatusCreated, created.Code, created.Body.String())

			w := a.do(http.MethodGet, "/v1/idempotency-keys/"+escaped, acmeKey, "", "")
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			var got handlers.IdempotencyKeyResponse
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
			require.Equal(t, "idempotency_key", got.Object)
			require.Equal(t, key, got.Key)
			require.Equal(t, "completed", got.State)
			require.Equal(t, idempotency.PointStarted, got.RecoveryPoint)
			require.Equal(t, "POST", got.Method)
			require.Equal(t, "/v1/orders", got.Path)
			require.Len(t, got.Fingerprint, 64)
			require.Nil(t, got.LockedUntil, "a completed record is not locked")
			require.WithinDuration(t, time.Now(), got.CreatedAt, time.Minute)
			require.Equal(t, time.Hour, got.ExpiresAt.Sub(got.CreatedAt))
			require.False(t, got.UpdatedAt.Before(got.CreatedAt))
			require.NotNil(t, got.Response)
			require.Equal(t, http.StatusCreated, got.Response.Status)
			require.Equal(t, created.Header().Get("Content-Type"), got.Response.ContentType)
			require.Equal(t, created.Header().Get("Location"), *got.Response.Location)
			require.Equal(t, "json", got.Response.BodyEncoding)
			require.JSONEq(t, created.Body.String(), string(got.Response.Body))

			t.Run("another merchant's key is not found", func(t *testing.T) {
				w := a.do(http.MethodGet, "/v1/idempotency-keys/"+escaped, globexKey, "", "")
				requireProblem(t, w, http.StatusNotFound, "not_found")
				w = a.do(http.MethodGet, "/v1/idempotency-keys/never-used", acmeKey, "", "")
				requireProblem(t, w, http.StatusNotFound, "not_found")
			})
			t.Run("the key is validated like the header", func(t *testing.T) {
				requireProblem(t, a.do(http.MethodGet, "/v1/idempotency-keys/has%20space", acmeKey, "", ""), http.StatusBadRequest, "idempotency_key_invalid")
				requireProblem(t, a.do(http.MethodGet, "/v1/idempotency-keys/"+strings.Repeat("k", 256), acmeKey, "", ""), http.StatusBadRequest, "idempotency_key_invalid")
				requireProblem(t, a.do(http.MethodGet, "/v1/idempotency-keys/", acmeKey, "", ""), http.StatusBadRequest, "idempotency_key_invalid")
			})
			t.Run("without an API key nothing is told", func(t *testing.T) {
				requireProblem(t, a.do(http.MethodGet, "/v1/idempotency-keys/"+escaped, "", "", ""), http.StatusUnauthorized, "unauthorized")
			})
			t.Run("an executing record shows its lock and no response", func(t *testing.T) {
				now := time.Now().UTC().Truncate(time.Microsecond)
				rec := &idempotency.Record{Scope: a.merchant, Key: "pay-1", Method: "POST", Path: "/v1/orders/ord_1/payments",
					Fingerprint: "fp", State: idempotency.StateExecuting, Point: "payment_created:pay_1",
					LockedUntil: now.Add(time.Minute), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
				require.NoError(t, a.store.Insert(t.Context(), rec))
				w := a.do(http.MethodGet, "/v1/idempotency-keys/pay-1", acmeKey, "", "")
				require.Equal(t, http.StatusOK, w.Code, w.Body.String())
				var body map[string]any
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
				require.Equal(t, "executing", body["state"])
				require.Equal(t, "payment_created:pay_1", body["recovery_point"])
				require.Equal(t, now.Add(time.Minute).Format(time.RFC3339Nano), body["locked_until"])
				require.Nil(t, body["response"])
			})
			t.Run("the access log has the key's hash, never the key", func(t *testing.T) {
				logs := a.logs.String()
				require.NotContains(t, logs, "order/2025")
				require.NotContains(t, logs, "order%2F2025")
				require.NotContains(t, logs, "pay-1")
				require.NotContains(t, logs, acmeKey)
				var seenPost, seenGet bool
				for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
					var entry map[string]any
					require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
					if entry["msg"] != "request" {
						continue
					}
					require.NotEmpty(t, entry["request_id"])
					switch {
					case entry["method"] == "POST" && entry["route"] == "/v1/orders":
						seenPost = true
						require.Equal(t, a.hash(key), entry["idempotency_key_hash"])
					case entry["method"] == "GET" && entry["status"] == 200.0 && entry["idempotency_key_hash"] == a.hash(key):
						seenGet = true
						require.Equal(t, "/v1/idempotency-keys/*key", entry["path"])
					}
				}
				require.True(t, seenPost, "the POST's access line carries the hash")
				require.True(t, seenGet, "the GET's access line carries the hash of the key in its path")
				require.Len(t, a.hash(key), 12)
			})
		})
	}
}

func TestStoredResponseBodyEncoding(t *testing.T) {
	cases := []struct {
		name, contentType, body string
		encoding, want          string
	}{
		{"json", "application/json; charset=utf-8", `{"a":1}`, "json", `{"a":1}`},
		{"problem json", "application/problem+json", `{"code":"payment_declined"}`, "json", `{"code":"payment_declined"}`},
		{"not json despite the type", "application/json", `{"a":`, "base64", `"` + base64.StdEncoding.EncodeToString([]byte(`{"a":`)) + `"`},
		{"text", "text/plain", "hello", "base64", `"aGVsbG8="`},
		{"empty", "", "", "base64", `""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := handlers.ToStoredResponseForTest(idempotency.Answer{Status: 200, Header: http.Header{"Content-Type": {tc.contentType}}, Body: []byte(tc.body), Final: true})
			require.Equal(t, tc.encoding, got.BodyEncoding)
			require.JSONEq(t, tc.want, string(got.Body))
			require.Nil(t, got.Location)
		})
	}
}

func TestIdempotencyKeyRouteIsInTheSpec(t *testing.T) {
	r := gin.New()
	handlers.RegisterSwagger(r)
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/swagger/doc.json", nil))
	require.Equal(t, http.StatusOK, w.Code)
	for _, want := range []string{`"/v1/idempotency-keys/{key}"`, `"handlers.IdempotencyKeyResponse"`, `"handlers.StoredResponse"`} {
		require.Contains(t, w.Body.String(), want)
	}
}
