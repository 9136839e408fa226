package app_test

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// keyLookups reads api_key_lookups_total{result} from the API's /metrics:
// each known or unknown is one database read of the api_keys table.
func keyLookups(t *testing.T, api *apptest.API, result string) int {
	t.Helper()
	return keyLookupsAt(t, api.URL, result)
}

// keyLookupsAt is keyLookups from the /metrics under base: production's
// admin listener (METRICS_ADDR).
func keyLookupsAt(t *testing.T, base, result string) int {
	t.Helper()
	m := apptest.Call(t, "GET", base+"/metrics", "", "", "")
	require.Equal(t, 200, m.Status)
	found := regexp.MustCompile(`(?m)^api_key_lookups_total\{result="` + result + `"\} (\d+)$`).FindSubmatch(m.Body)
	require.NotNil(t, found, "no api_key_lookups_total{result=%q}", result)
	n, err := strconv.Atoi(string(found[1]))
	require.NoError(t, err)
	return n
}

// TestUnknownKeyFloodIsBudgeted is issue 26's flood of distinct unknown API
// keys from one address: at most UNKNOWN_KEY_BUDGET of them are read from
// the database in a window; the rest are 429 too_many_unknown_keys with
// Retry-After, unread. A known key from the same address, and any client
// from another address, are served meanwhile.
func TestUnknownKeyFloodIsBudgeted(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	const budget = 20
	api := apptest.StartBinary(t, bin, testkit.DatabaseURL(t, database.SQLite),
		apptest.Env(fmt.Sprintf("UNKNOWN_KEY_BUDGET=%d", budget), "UNKNOWN_KEY_WINDOW=10m"))

	ok := apptest.Call(t, "GET", api.URL+"/v1/orders", "sk_test_acme", "", "")
	require.Equal(t, 200, ok.Status, string(ok.Body))
	before := keyLookups(t, api, "unknown")

	var unauthorized, limited atomic.Int64
	var wg sync.WaitGroup
	slots := make(chan struct{}, 32) // under MAX_CONNS_PER_CLIENT
	for i := range 500 {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			a := apptest.Call(t, "GET", api.URL+"/v1/orders", fmt.Sprintf("sk_live_flood%028d", i), "", "")
			switch a.Status {
			case 401:
				unauthorized.Add(1)
			case 429:
				if a.Header.Get("Retry-After") != "" && a.JSON(t)["code"] == "too_many_unknown_keys" {
					limited.Add(1)
				}
			}
		})
	}
	wg.Wait()
	reads := keyLookups(t, api, "unknown") - before
	t.Logf("500 unknown keys: %d read (401), %d refused unread (429); %d database reads", unauthorized.Load(), limited.Load(), reads)
	require.LessOrEqual(t, reads, budget, "the flood reached the database")
	require.EqualValues(t, reads, unauthorized.Load())
	require.EqualValues(t, 500-reads, limited.Load())

	// Over budget, the known key still works from the same address.
	known := apptest.Call(t, "GET", api.URL+"/v1/orders", "sk_test_acme", "", "")
	require.Equal(t, 200, known.Status, string(known.Body))
	// Another address has a budget of its own.
	resp, body := rawAnswer(t, otherClient, api.Addr, "GET /v1/orders HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer sk_live_other\r\nConnection: close\r\n\r\n")
	requireServerProblem(t, resp, body, 401, "unauthorized")
}

// TestUnknownKeyBudgetFollowsTrustedProxies: behind a proxy named in
// TRUSTED_PROXIES the budget counts by the client that X-Forwarded-For
// names, so one client over its budget does not lock out the others who
// share the proxy; without the setting, X-Forwarded-For is not believed
// and the proxy's own address is the client.
func TestUnknownKeyBudgetFollowsTrustedProxies(t *testing.T) {
	unknown := func(api *apptest.API, client string, i int) int {
		return apptest.Call(t, "GET", api.URL+"/v1/orders", fmt.Sprintf("sk_live_proxy%028d", i), "", "", "X-Forwarded-For", client).Status
	}
	env := apptest.Env("UNKNOWN_KEY_BUDGET=2", "UNKNOWN_KEY_WINDOW=10m")

	trusting := apptest.Start(t, testkit.DatabaseURL(t, database.SQLite), env, apptest.Env("TRUSTED_PROXIES=127.0.0.1/8,::1"))
	require.Equal(t, 401, unknown(trusting, "203.0.113.7", 1))
	require.Equal(t, 401, unknown(trusting, "203.0.113.7", 2))
	require.Equal(t, 429, unknown(trusting, "203.0.113.7", 3), "the first client is over its budget")
	require.Equal(t, 401, unknown(trusting, "198.51.100.9", 4), "another client behind the same proxy has its own")

	plain := apptest.Start(t, testkit.DatabaseURL(t, database.SQLite), env)
	require.Equal(t, 401, unknown(plain, "203.0.113.7", 1))
	require.Equal(t, 401, unknown(plain, "203.0.113.7", 2))
	require.Equal(t, 429, unknown(plain, "198.51.100.9", 3), "X-Forwarded-For from an untrusted peer names no one")
}
