package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/problem"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestMethodNotAllowed: a method that a path's routes do not serve is 405
// method_not_allowed with Allow, through the binary; under /v1 only after
// the API key, so that a caller without one gets the 401 it gets
// everywhere, with no Allow. Before, it was 404 (issue 46: DELETE
// /v1/orders, PATCH /v1/orders/{id}). A path no route serves stays 404,
// and nothing is done either way. Every answer is checked against the
// document (apptest), where 405 and Allow are declared.
func TestMethodNotAllowed(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	api := apptest.StartBinary(t, bin, testkit.DatabaseURL(t, database.SQLite))
	const acme = "sk_test_acme"
	order := api.CreateOrder(t, acme)

	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodDelete, "/v1/orders", "GET, POST"},
		{http.MethodPatch, "/v1/orders/" + order, "GET"},
		{http.MethodDelete, "/v1/orders/" + order, "GET"},
		{http.MethodGet, "/v1/webhooks/provider", "POST"},
		{http.MethodPost, "/healthz", "GET"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			if strings.HasPrefix(tc.path, "/v1/") {
				anonymous := apptest.Call(t, tc.method, api.URL+tc.path, "", "", "")
				requireProblem(t, anonymous, http.StatusUnauthorized, problem.CodeUnauthorized)
				require.Empty(t, anonymous.Header.Get("Allow"), "a caller without a key learns nothing of the path")
			}
			a := apptest.Call(t, tc.method, api.URL+tc.path, acme, "", "")
			requireProblem(t, a, http.StatusMethodNotAllowed, problem.CodeMethodNotAllowed)
			require.Equal(t, tc.allow, a.Header.Get("Allow"))
		})
	}
	unknown := apptest.Call(t, http.MethodDelete, api.URL+"/v1/no/such/path", acme, "", "")
	requireProblem(t, unknown, http.StatusNotFound, problem.CodeNotFound)
	require.Empty(t, unknown.Header.Get("Allow"))

	require.Equal(t, 200, apptest.Call(t, http.MethodGet, api.URL+"/v1/orders/"+order, acme, "", "").Status, "the DELETE did nothing")
}
