package app_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestProductionServesMetricsOnItsAdminListener: production's /metrics
// (every merchant's figures) is 404 problem+json on the API's port and 200
// on METRICS_ADDR, where the health probes answer too and the API does not;
// development keeps /metrics on the API's port.
func TestProductionServesMetricsOnItsAdminListener(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	admin := testkit.FreeAddr(t)
	prod := apptest.StartBinary(t, bin, testkit.DatabaseURL(t, database.SQLite), apptest.Env("APP_ENV=production", "DEMO_SEED=",
		"PROVIDER_WEBHOOK_SECRET="+prodWebhookSecret, "LOG_KEY_SECRET="+prodLogKeySecret, "PROVIDER_KEY_SECRET="+prodKeySecret,
		"METRICS_ADDR="+admin))

	onAPI := apptest.Call(t, "GET", prod.URL+"/metrics", "", "", "")
	require.Equal(t, 404, onAPI.Status, "production serves /metrics on the API's port")
	require.Equal(t, "application/problem+json", onAPI.Header.Get("Content-Type"))
	require.NotContains(t, string(onAPI.Body), "payments_")

	onAdmin := apptest.Call(t, "GET", "http://"+admin+"/metrics", "", "", "")
	require.Equal(t, 200, onAdmin.Status)
	require.Contains(t, string(onAdmin.Body), "http_request_duration_seconds")
	for _, probe := range []string{"/healthz", "/readyz"} {
		a := apptest.Call(t, "GET", "http://"+admin+probe, "", "", "")
		require.Equal(t, 200, a.Status, "%s on the admin listener: %s", probe, a.Body)
	}
	notAPI := apptest.Call(t, "GET", "http://"+admin+"/v1/orders", "sk_test_acme", "", "")
	require.Equal(t, 404, notAPI.Status, "the admin listener serves the API")
	require.Equal(t, "application/problem+json", notAPI.Header.Get("Content-Type"))

	dev := apptest.StartBinary(t, bin, testkit.DatabaseURL(t, database.SQLite))
	metrics := apptest.Call(t, "GET", dev.URL+"/metrics", "", "", "")
	require.Equal(t, 200, metrics.Status)
	require.True(t, strings.Contains(string(metrics.Body), "http_request_duration_seconds"))
}
