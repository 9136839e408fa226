package app_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	openapi "github.com/idemkeys/payments/api"
	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// specOperation is one operation of the served document, as this test
// needs it.
type specOperation struct {
	method, path string
	secured      bool // needs the API key
	keyed        bool // takes an Idempotency-Key
	body         bool // takes a request body
}

func specOperations(t *testing.T) []specOperation {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]struct {
			Security    []map[string]any
			Parameters  []struct{ Name, In string }
			RequestBody *struct{}
		}
	}
	require.NoError(t, json.Unmarshal(openapi.OpenAPI, &doc))
	var ops []specOperation
	for path, item := range doc.Paths {
		for method, op := range item {
			o := specOperation{method: strings.ToUpper(method), path: path, secured: len(op.Security) > 0, body: op.RequestBody != nil}
			for _, p := range op.Parameters {
				o.keyed = o.keyed || (p.In == "header" && p.Name == "Idempotency-Key")
			}
			ops = append(ops, o)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].path+ops[i].method < ops[j].path+ops[j].method })
	return ops
}

// TestEveryRouteAnswersItsCommonErrors sends every operation of the
// document the errors that any route of its kind can give, so that the
// answer check (apptest) sees each of them on every route: 401 without the
// API key, 400 without an Idempotency-Key, 413 for a body over
// MAX_BODY_BYTES, 429 past the new-key limit, 404 for an unknown id; and
// every path a method it is not served with: 405 with Allow (401 first
// under /v1 without a key). The operations come from the document itself,
// so a new route is covered without a change here.
func TestEveryRouteAnswersItsCommonErrors(t *testing.T) {
	testkit.EndToEnd(t)
	api := apptest.Start(t, testkit.DatabaseURL(t, database.SQLite), apptest.Env(
		"MAX_BODY_BYTES=2048", "RATE_LIMIT_NEW_KEYS=1", "RATE_LIMIT_WINDOW=1h"))
	ops := specOperations(t)
	require.NotEmpty(t, ops)
	url := func(o specOperation) string {
		p := strings.NewReplacer("{id}", "none_0", "{key}", "no-such-key").Replace(o.path)
		return api.URL + p
	}
	big := `{"pad":"` + strings.Repeat("x", 4096) + `"}`

	// No path of the document is served with PATCH.
	paths := map[string]bool{}
	for _, o := range ops {
		require.NotEqual(t, http.MethodPatch, o.method)
		paths[o.path] = true
	}
	for path := range paths {
		t.Run("PATCH "+path, func(t *testing.T) {
			u := url(specOperation{path: path})
			if strings.HasPrefix(path, "/v1/") {
				a := apptest.Call(t, http.MethodPatch, u, "", "", "")
				require.Equal(t, http.StatusUnauthorized, a.Status, "no API key: %s", a.Body)
			}
			a := apptest.Call(t, http.MethodPatch, u, "sk_test_acme", "", "")
			require.Equal(t, http.StatusMethodNotAllowed, a.Status, "a method the path is not served with: %s", a.Body)
			require.NotEmpty(t, a.Header.Get("Allow"))
		})
	}

	for _, o := range ops {
		t.Run(o.method+" "+o.path, func(t *testing.T) {
			if o.secured {
				a := apptest.Call(t, o.method, url(o), "", "k-"+apptest.NewKey(), "{}")
				require.Equal(t, http.StatusUnauthorized, a.Status, "no API key: %s", a.Body)
				if !strings.Contains(o.path, "{") && o.method == http.MethodGet {
					return
				}
				if o.method == http.MethodGet {
					a := apptest.Call(t, o.method, url(o), "sk_test_acme", "", "")
					require.Equal(t, http.StatusNotFound, a.Status, "an unknown id: %s", a.Body)
				}
			}
			if o.keyed {
				a := apptest.Call(t, o.method, url(o), "sk_test_acme", "", "{}")
				require.Equal(t, http.StatusBadRequest, a.Status, "no Idempotency-Key: %s", a.Body)
			}
			if o.body {
				a := apptest.Call(t, o.method, url(o), "sk_test_acme", "k-"+apptest.NewKey(), big)
				require.Equal(t, http.StatusRequestEntityTooLarge, a.Status, "a body over MAX_BODY_BYTES: %s", a.Body)
			}
			if o.keyed {
				// One new key an hour for globex: the first takes it (its
				// answer does not matter), the next is limited.
				apptest.Call(t, o.method, url(o), "sk_test_globex", "k-"+apptest.NewKey(), "{}")
				a := apptest.Call(t, o.method, url(o), "sk_test_globex", "k-"+apptest.NewKey(), "{}")
				require.Equal(t, http.StatusTooManyRequests, a.Status, "past the new-key limit: %s", a.Body)
			}
		})
	}
}
