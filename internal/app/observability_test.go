package app_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// debugLogs keeps the API's logs at debug level, so that every line any
// code writes is searched for keys and secrets.
var debugLogs = apptest.Env("LOG_LEVEL=debug")

// metricsOf scrapes /metrics and returns each sample's value by series, as
// the exposition writes it: name{label="value",...} with labels sorted.
func metricsOf(t *testing.T, baseURL string) (map[string]float64, string) {
	t.Helper()
	a := apptest.Call(t, "GET", baseURL+"/metrics", "", "", "")
	require.Equal(t, http.StatusOK, a.Status)
	raw := a.Body
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	return out, string(raw)
}

func idem(route, outcome string) string {
	return fmt.Sprintf(`idempotency_requests_total{outcome=%q,route=%q}`, outcome, route)
}

func httpCount(method, route string, status int) string {
	return fmt.Sprintf(`http_request_duration_seconds_count{method=%q,route=%q,status="%d"}`, method, route, status)
}

// keyState reads a key's record through GET /v1/idempotency-keys/{key}.
func keyState(t *testing.T, baseURL, key string) string {
	t.Helper()
	a := apptest.Call(t, "GET", baseURL+"/v1/idempotency-keys/"+url.PathEscape(key), "sk_test_acme", "", "")
	if a.Status != http.StatusOK {
		return fmt.Sprint(a.Status)
	}
	return a.JSON(t)["state"].(string)
}

// secretMarker is a value sent in a request body that must never be logged.
const secretMarker = "body-secret-7f3a9c"

// TestMetricsAndLogsAfterScenarios scripts the scenarios an operator cares
// about, then checks the counts on /metrics and searches the logs for keys
// and secrets.
func TestMetricsAndLogsAfterScenarios(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			// No webhooks: the reconciler is what resolves the lost response.
			api := apptest.Start(t, dbURL, debugLogs, apptest.WithSilentProvider(provider.Config{}), apptest.Env("PROVIDER_TIMEOUT=300ms", "RECONCILE_INTERVAL=100ms", "LOG_KEY_SECRET=a-log-secret-for-the-tests"))

			suffix := apptest.NewKey()
			orderKey, otherOrderKey, payKey := "obs-order-"+suffix, "obs-order2-"+suffix, "obs-pay-"+suffix
			body := strings.Replace(apptest.OrderBody, `"metadata":{}`, `"metadata":{"note":"`+secretMarker+`"}`, 1)

			// A new key, its replay, and a mismatch.
			created := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", orderKey, body)
			require.Equal(t, 201, created.Status, string(created.Body))
			replayed := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", orderKey, body)
			require.Equal(t, "true", replayed.Header.Get("Idempotent-Replayed"))
			mismatch := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", orderKey, apptest.OrderBody)
			require.Equal(t, 422, mismatch.Status)
			// A missing and an invalid key.
			require.Equal(t, 400, apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "", body).Status)
			require.Equal(t, 400, apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", strings.Repeat("x", 300), body).Status)
			// A path no route matches.
			require.Equal(t, 404, apptest.Call(t, "GET", api.URL+"/v1/no/such/route", "sk_test_acme", "", "").Status)

			// A payment whose answer is lost: 202, then the reconciler
			// finds the charge and finishes the record, which then replays.
			order := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", otherOrderKey, apptest.OrderBody)
			require.Equal(t, 201, order.Status)
			orderID := order.JSON(t)["id"].(string)
			payBody := `{"payment_method":"pm_fault_lost_response"}`
			accepted := apptest.Call(t, "POST", api.URL+"/v1/orders/"+orderID+"/payments", "sk_test_acme", payKey, payBody)
			require.Equal(t, 202, accepted.Status, string(accepted.Body))
			testkit.Eventually(t, 15*time.Second, "the reconciler finished the payment's record", func() bool {
				return keyState(t, api.URL, payKey) == "completed"
			})
			final := apptest.Call(t, "POST", api.URL+"/v1/orders/"+orderID+"/payments", "sk_test_acme", payKey, payBody)
			require.Equal(t, 201, final.Status, string(final.Body))
			require.Equal(t, "true", final.Header.Get("Idempotent-Replayed"))

			// The request id is taken from the client and echoed.
			echoed := apptest.Call(t, "GET", api.URL+"/v1/idempotency-keys/"+orderKey, "sk_test_acme", "", "", "X-Request-Id", "req-obs-42")
			require.Equal(t, 200, echoed.Status)
			require.Equal(t, "req-obs-42", echoed.Header.Get("X-Request-Id"))

			m, raw := metricsOf(t, api.URL)
			const orders, pay = "/v1/orders", "/v1/orders/:id/payments"
			for series, want := range map[string]float64{
				idem(orders, "executed"):    2,
				idem(orders, "replayed"):    1,
				idem(orders, "mismatch"):    1,
				idem(orders, "missing_key"): 1,
				idem(orders, "invalid_key"): 1,
				idem(pay, "executed"):       1,
				idem(pay, "replayed"):       1,

				`payments_reconciliations_total{result="resolved"}`:                  1,
				`payments_reconciliations_total{result="error"}`:                     0,
				`payment_provider_calls_total{op="charge",outcome="unknown"}`:        1,
				`payment_provider_calls_total{op="find_charge",outcome="succeeded"}`: 1,
				`payment_provider_call_duration_seconds_count{op="charge"}`:          1,
				`payments_unresolved{kind="payment",status="processing"}`:            0,
				`idempotency_records_executing{lock="held"}`:                         0,
				`idempotency_records_executing{lock="free"}`:                         0,
				`db_stats_up`: 1,
				fmt.Sprintf(`idempotency_store_errors_total{op="insert",store=%q}`, dialect): 0,

				httpCount("POST", orders, 201):     3,
				httpCount("POST", orders, 422):     1,
				httpCount("POST", orders, 400):     2,
				httpCount("POST", pay, 202):        1,
				httpCount("POST", pay, 201):        1,
				httpCount("GET", "unmatched", 404): 1,
			} {
				require.Contains(t, m, series)
				require.Equal(t, want, m[series], series)
			}
			// The Atomic path runs the handler before it learns of a replay
			// or a mismatch (rolled back), so each of them was processed.
			require.GreaterOrEqual(t, m[`idempotency_processing_seconds_count{route="/v1/orders"}`], 2.0)
			require.GreaterOrEqual(t, m[httpCount("GET", "/v1/idempotency-keys/*key", 200)], 2.0)
			// Labels never carry a key, an id or an API key.
			for _, secret := range []string{orderKey, otherOrderKey, payKey, orderID, "sk_test_acme", secretMarker} {
				require.NotContains(t, raw, secret)
			}

			require.NoError(t, api.Stop())
			logs := api.Logs()
			requireNoSecrets(t, logs, orderKey, otherOrderKey, payKey, strings.Repeat("x", 300))
			// Each keyed request's access line carries the key's hash, and
			// the request id the client sent is on its line.
			lines := accessLines(t, logs)
			hashes := map[string]bool{}
			sawClientID := false
			for _, l := range lines {
				if h, ok := l["idempotency_key_hash"].(string); ok {
					require.Len(t, h, 12)
					hashes[h] = true
				}
				require.NotEmpty(t, l["request_id"])
				sawClientID = sawClientID || l["request_id"] == "req-obs-42"
			}
			require.True(t, sawClientID)
			require.Len(t, hashes, 4, "one hash per key: order, other order, payment, the invalid one")
		})
	}
}

// requireNoSecrets searches the logs for what must never be in them.
func requireNoSecrets(t *testing.T, logs string, keys ...string) {
	t.Helper()
	require.NotEmpty(t, logs)
	for _, s := range append([]string{"sk_test_acme", "sk_test_globex", "Bearer", "Authorization", "authorization", secretMarker}, keys...) {
		require.NotContains(t, logs, s)
	}
}

func accessLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), "every log line is JSON: %s", line)
		if entry["msg"] == "request" {
			out = append(out, entry)
		}
	}
	require.NotEmpty(t, out)
	return out
}

// TestMetricsSeeStuckAndPurgedRecords: a payment left unknown shows in the
// unresolved and executing gauges (the reconciler is off), and expired
// records show as janitor purges.
func TestMetricsSeeStuckAndPurgedRecords(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			t.Run("stuck", func(t *testing.T) {
				dbURL := testkit.DatabaseURL(t, dialect)
				api := apptest.Start(t, dbURL, debugLogs, apptest.WithSilentProvider(provider.Config{}), apptest.Env("PROVIDER_TIMEOUT=300ms", "RECONCILE_INTERVAL=1h"))

				order := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", apptest.NewKey(), apptest.OrderBody)
				require.Equal(t, 201, order.Status)
				a := apptest.Call(t, "POST", api.URL+"/v1/orders/"+order.JSON(t)["id"].(string)+"/payments", "sk_test_acme", apptest.NewKey(),
					`{"payment_method":"pm_fault_lost_response"}`)
				require.Equal(t, 202, a.Status)
				time.Sleep(50 * time.Millisecond) // let the oldest lock age be measurably positive
				m, _ := metricsOf(t, api.URL)
				require.Equal(t, 1.0, m[`payments_unresolved{kind="payment",status="processing"}`])
				require.Equal(t, 0.0, m[`payments_unresolved{kind="refund",status="processing"}`])
				require.Equal(t, 1.0, m[`idempotency_records_executing{lock="free"}`], "the 202 gave the lock back")
				require.Equal(t, 0.0, m[`idempotency_records_executing{lock="held"}`])
				require.Greater(t, m[`idempotency_oldest_lock_age_seconds`], 0.0)
				require.Equal(t, 1.0, m[`payment_provider_calls_total{op="charge",outcome="unknown"}`])
				require.Equal(t, 0.0, m[`payments_reconciliations_total{result="resolved"}`])
			})
			t.Run("purged", func(t *testing.T) {
				dbURL := testkit.DatabaseURL(t, dialect)
				api := apptest.Start(t, dbURL, debugLogs, apptest.Env("IDEMPOTENCY_TTL=1s", "JANITOR_INTERVAL=100ms"))
				keys := []string{apptest.NewKey(), apptest.NewKey(), apptest.NewKey()}
				for _, k := range keys {
					require.Equal(t, 201, apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", k, apptest.OrderBody).Status)
				}
				testkit.Eventually(t, 15*time.Second, "the janitor purged the three records", func() bool {
					m, _ := metricsOf(t, api.URL)
					return m[`idempotency_janitor_purged_total`] == 3
				})
				db, err := database.Open(dbURL, database.Options{MaxOpenConns: 1})
				require.NoError(t, err)
				defer db.Close()
				var n int64
				require.NoError(t, db.Raw("SELECT count(*) FROM idempotency_records").Scan(&n).Error)
				require.Zero(t, n)
				require.Equal(t, "404", keyState(t, api.URL, keys[0]), "an expired key is gone")
			})
		})
	}
}

// TestUnreachableDatabaseFailsStartAfterBackoff points DATABASE_URL at a
// closed port: Run retries for DB_CONNECT_TIMEOUT, then fails saying why
// (cmd/api's main exits 1 with that message).
func TestUnreachableDatabaseFailsStartAfterBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedPort := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())

	cfg, err := config.Load([]string{
		"HTTP_ADDR=" + testkit.FreeAddr(t),
		fmt.Sprintf("DATABASE_URL=postgres://postgres:hunter2@127.0.0.1:%d/payments?sslmode=disable", closedPort),
		"DB_CONNECT_TIMEOUT=1s",
	})
	require.NoError(t, err)
	logs := &testkit.SyncBuffer{}
	start := time.Now()
	err = app.Run(context.Background(), cfg, app.NewLogger(logs, cfg.LogLevel))
	elapsed := time.Since(start)
	require.Error(t, err)
	require.ErrorContains(t, err, "database unreachable after 1s")
	require.ErrorContains(t, err, "connect")
	// It retries until the whole timeout is spent, then stops.
	require.Less(t, elapsed, 15*time.Second, "it gave up within a bounded time")

	text := logs.String()
	require.Contains(t, text, "database not reachable yet; retrying", "it retried with backoff")
	require.NotContains(t, text, "hunter2", "the database password is never logged")
	require.NotContains(t, err.Error(), "hunter2")
}

// TestShutdownDrainsAndLogsEachStep stops the API while a payment is in
// flight: the payment still completes, the logs show each step of the stop
// in order, and no record is left executing.
func TestShutdownDrainsAndLogsEachStep(t *testing.T) {
	dbURL := testkit.DatabaseURL(t, database.SQLite)
	api := apptest.Start(t, dbURL, debugLogs, apptest.Env("PROVIDER_TIMEOUT=5s", "SHUTDOWN_TIMEOUT=20s"))

	order := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", apptest.NewKey(), apptest.OrderBody)
	require.Equal(t, 201, order.Status)
	key := apptest.NewKey()
	inFlight := make(chan apptest.Answer, 1)
	payURL := api.URL + "/v1/orders/" + order.JSON(t)["id"].(string) + "/payments"
	go func() {
		a, _ := apptest.Do(apptest.Request{Method: "POST", URL: payURL, APIKey: "sk_test_acme", Key: key, Body: `{"payment_method":"pm_fault_slow"}`})
		inFlight <- a
	}()
	// The provider answers pm_fault_slow after 2 s: stop while it waits.
	testkit.Eventually(t, 10*time.Second, "the payment is in flight", func() bool {
		return keyState(t, api.URL, key) == "executing"
	})
	stopped := make(chan error, 1)
	go func() { stopped <- api.Stop() }()

	got := <-inFlight
	require.Equal(t, 201, got.Status, "the in-flight request finishes: %s", got.Body)
	require.NoError(t, <-stopped, "a graceful stop returns nil")

	logs := api.Logs()
	shutting := strings.Index(logs, "shutting down: no new requests")
	paid := strings.Index(logs, `"route":"/v1/orders/:id/payments","path"`)
	stoppedAt := strings.Index(logs, `"msg":"stopped"`)
	workers := strings.Index(logs, `"msg":"workers stopped"`)
	require.True(t, shutting >= 0 && paid > shutting && stoppedAt > paid && workers > stoppedAt,
		"shutting down (%d) < in-flight request answered (%d) < stopped (%d) < workers stopped (%d)\n%s", shutting, paid, stoppedAt, workers, logs)
	requireNoSecrets(t, logs, key)

	db, err := database.Open(dbURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer db.Close()
	var open int64
	require.NoError(t, db.Raw("SELECT count(*) FROM idempotency_records WHERE state = 'executing'").Scan(&open).Error)
	require.Zero(t, open, "no record is left half-written")
}

// TestResponseEncryptionEndToEnd turns RESPONSE_ENCRYPTION_KEYS on, rotates
// the key across restarts, and drops the old key too early, on each
// dialect: the column holds ciphertext, old records keep replaying after the
// rotation, and a record under a dropped key is a clear error.
func TestResponseEncryptionEndToEnd(t *testing.T) {
	k1 := "k1:" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	k2 := "k2:" + base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			body := strings.Replace(apptest.OrderBody, `"metadata":{}`, `"metadata":{"note":"`+secretMarker+`"}`, 1)
			column := func(key string) (string, string) {
				t.Helper()
				db, err := database.Open(dbURL, database.Options{MaxOpenConns: 1})
				require.NoError(t, err)
				defer db.Close()
				var row struct {
					ResponseBody  []byte
					ResponseKeyID *string
				}
				require.NoError(t, db.Raw("SELECT response_body, response_key_id FROM idempotency_records WHERE idempotency_key = ?", key).Scan(&row).Error)
				require.NotNil(t, row.ResponseKeyID, "the record names its key")
				return string(row.ResponseBody), *row.ResponseKeyID
			}

			api := apptest.Start(t, dbURL, debugLogs, apptest.Env("RESPONSE_ENCRYPTION_KEYS="+k1))
			first := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "enc-1", body)
			require.Equal(t, 201, first.Status)
			stored, keyID := column("enc-1")
			require.Equal(t, "k1", keyID)
			require.NotContains(t, stored, secretMarker, "the database holds ciphertext")
			require.NotContains(t, stored, `"object":"order"`)
			require.NoError(t, api.Stop())
			require.Contains(t, api.Logs(), `"active_key_id":"k1"`)

			// Rotated: k2 encrypts, k1 still decrypts.
			api = apptest.Start(t, dbURL, debugLogs, apptest.Env("RESPONSE_ENCRYPTION_KEYS="+k1+","+k2, "RESPONSE_ENCRYPTION_KEY_ID=k2"))
			again := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "enc-1", body)
			require.Equal(t, 201, again.Status)
			require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
			require.Equal(t, first.Body, again.Body, "byte for byte after the rotation")
			require.Equal(t, 201, apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "enc-2", body).Status)
			_, keyID = column("enc-2")
			require.Equal(t, "k2", keyID)
			shown := apptest.Call(t, "GET", api.URL+"/v1/idempotency-keys/enc-1", "sk_test_acme", "", "")
			require.Equal(t, 200, shown.Status)
			require.Contains(t, string(shown.Body), secretMarker, "the owner sees the decrypted answer")
			require.NoError(t, api.Stop())

			// k1 dropped while its record lives: a clear error, no replay.
			api = apptest.Start(t, dbURL, debugLogs, apptest.Env("RESPONSE_ENCRYPTION_KEYS="+k2))
			lost := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "enc-1", body)
			require.Equal(t, 500, lost.Status)
			require.Equal(t, 201, apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "enc-2", body).Status)
			require.NoError(t, api.Stop())
			logs := api.Logs()
			require.Contains(t, logs, `stored response is encrypted with an unknown key id: \"k1\"`)
			for _, secret := range []string{k1[3:], k2[3:], secretMarker, "enc-1\"", "sk_test_acme"} {
				require.NotContains(t, logs, secret)
			}
		})
	}
}
