package handlers_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
)

// TestAccessLogNeverHoldsAKeyFromThePath: whatever the spelling of a path
// that holds an idempotency key (extra slashes, another case, dot
// segments, percent-encoding once or twice, a route that matches or a 404),
// the access line shows the route and the key's keyed hash, never the key.
func TestAccessLogNeverHoldsAKeyFromThePath(t *testing.T) {
	const key = "secret-order-4711"
	spellings := []string{
		"/v1/idempotency-keys/" + key,
		"/v1//idempotency-keys/" + key,
		"//v1/idempotency-keys/" + key,
		"/v1/idempotency-keys//" + key,
		"/V1/idempotency-keys/" + key,
		"/v1/IDEMPOTENCY-KEYS/" + key,
		"/v1/./idempotency-keys/" + key,
		"/v1/orders/../idempotency-keys/" + key,
		"/v1/idempotency%2Dkeys/" + key,
		"/v1/%69dempotency-keys/" + key,
		"/v1%2Fidempotency-keys%2F" + key,
		"/v1/%2569dempotency-keys/" + key,
		"/v1/idempotency-keys/" + strings.ReplaceAll(key, "-", "%2D"),
		"/v1/idempotency-keys/" + key + "/",
		"/v2/idempotency-keys/" + key,
	}
	a := newKeysAPI(t, database.SQLite)
	for i, path := range spellings {
		// Subtests by number: a path is no file name (TempDir).
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			before := len(a.logs.String())
			for _, apiKey := range []string{acmeKey, ""} {
				w := a.do(http.MethodGet, path, apiKey, "", "")
				require.NotEqual(t, http.StatusInternalServerError, w.Code)
			}
			logs := a.logs.String()[before:]
			require.NotContains(t, logs, key)
			require.NotContains(t, logs, "secret-order")
			lines := 0
			for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
				var entry map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
				if entry["msg"] != "request" {
					continue
				}
				lines++
				require.Equal(t, "/v1/idempotency-keys/*key", entry["path"], line)
				require.Len(t, entry["idempotency_key_hash"], 12, line)
			}
			require.Equal(t, 2, lines, path+"\n"+logs)
		})
	}
	// The route's own spelling keeps the header's hash, so one key's POST
	// and GET lines can be matched.
	a.do(http.MethodGet, "/v1//idempotency-keys/"+key, acmeKey, "", "")
	require.Contains(t, a.logs.String(), `"idempotency_key_hash":"`+a.hash(key)+`"`)
}

// TestKeyHashOnlyWhereItIsWritten: the key's keyed hash is worked out for
// the access line that carries it, once per request, and not at all when
// the log writes no access lines (and no span records).
func TestKeyHashOnlyWhereItIsWritten(t *testing.T) {
	for _, x := range []struct {
		level slog.Level
		calls int
	}{{slog.LevelInfo, 1}, {slog.LevelError, 0}} {
		t.Run(x.level.String(), func(t *testing.T) {
			calls := 0
			hash := handlers.NewKeyHasher([]byte("a-log-secret-for-tests"))
			a := newKeysAPIWith(t, database.SQLite, x.level, func(key string) string {
				calls++
				return hash(key)
			})
			w := a.do(http.MethodPost, "/v1/orders", acmeKey, "order-4711", `{"customer_id": "cus_1"}`)
			require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String()) // no items
			require.Equal(t, x.calls, calls)
			if x.calls > 0 {
				require.Contains(t, a.logs.String(), `"idempotency_key_hash":"`+hash("order-4711")+`"`)
			} else {
				require.NotContains(t, a.logs.String(), "idempotency_key_hash")
			}
		})
	}
}
