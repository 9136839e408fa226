package app_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestOneMerchantCannotOpenTheBreakerForAll, through the API binary: 20
// concurrent payments of acme with a method whose every first call the
// provider answers 503 open acme's circuit breaker (the default, 5 failures
// in a row), and globex's card payments go on at once, each charged once;
// acme's next card payment fails fast (502, nothing sent to the provider).
// /readyz says degraded with 200, /metrics shows the open breaker and the
// transition, and one log line names acme's merchant id. The breaker keeps
// no database state, so one dialect is enough.
func TestOneMerchantCannotOpenTheBreakerForAll(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, _ := apptest.Binaries(t)
	dbURL := testkit.DatabaseURL(t, database.SQLite)
	prov, err := provider.StartInProcess(context.Background(), provider.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	w := apptest.StartBinary(t, apiBin, dbURL, apptest.Env("PROVIDER_URL="+prov.URL, "LOG_LEVEL=info"))

	pay := func(apiKey, method string) apptest.Answer {
		order := w.CreateOrder(t, apiKey)
		return apptest.Call(t, "POST", w.URL+"/v1/orders/"+order+"/payments", apiKey, apptest.NewKey(), `{"payment_method":"`+method+`"}`)
	}

	// Orders first, so that the failing payments come close together.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			a := pay("sk_test_acme", "pm_fault_unavailable")
			assert.Equal(t, http.StatusBadGateway, a.Status, string(a.Body))
		})
	}
	wg.Wait()

	// Within the breaker's open timeout (5 s): globex is not affected.
	for range 5 {
		paid := pay("sk_test_globex", "pm_card_visa")
		require.Equal(t, http.StatusCreated, paid.Status, "another merchant's payment: %s", paid.Body)
		require.Len(t, prov.Server.ChargesByReference(paid.JSON(t)["id"].(string)), 1)
	}
	// acme's own breaker is open: a good card fails fast, sends nothing.
	refused := pay("sk_test_acme", "pm_card_visa")
	require.Equal(t, http.StatusBadGateway, refused.Status, string(refused.Body))
	require.Equal(t, "provider_unavailable", refused.JSON(t)["code"])
	require.Empty(t, prov.Server.ChargesByReference(refused.JSON(t)["payment_id"].(string)), "an open breaker sends nothing")

	ready := apptest.Call(t, "GET", w.URL+"/readyz", "", "", "")
	require.Equal(t, http.StatusOK, ready.Status, string(ready.Body))
	body := ready.JSON(t)
	require.Equal(t, "degraded", body["status"])
	require.Equal(t, "open", body["checks"].(map[string]any)["provider_breaker"])

	m, _ := metricsOf(t, w.URL)
	require.EqualValues(t, 1, m["payment_provider_breakers_open"])
	require.EqualValues(t, 1, m[`payment_provider_breaker_transitions_total{to="open"}`])

	acme := w.Text(t, "SELECT id FROM merchants WHERE name = 'acme'")
	var told []string
	for line := range strings.SplitSeq(w.Logs(), "\n") {
		if strings.Contains(line, "provider circuit breaker changed state") {
			told = append(told, line)
		}
	}
	require.Len(t, told, 1, "one transition, logged once")
	require.Contains(t, told[0], `"merchant_id":"`+acme+`"`)
	require.Contains(t, told[0], `"to":"open"`)
}
