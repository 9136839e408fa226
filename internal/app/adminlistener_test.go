package app_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// startProductionBinary runs the API binary in production, on SQLite, with
// its admin listener on admin and the settings of env added.
func startProductionBinary(t *testing.T, bin, admin string, env ...string) *apptest.API {
	t.Helper()
	return apptest.StartBinary(t, bin, testkit.DatabaseURL(t, database.SQLite), apptest.Env(append([]string{"APP_ENV=production", "DEMO_SEED=",
		"PROVIDER_WEBHOOK_SECRET=" + prodWebhookSecret, "LOG_KEY_SECRET=" + prodLogKeySecret, "PROVIDER_KEY_SECRET=" + prodKeySecret,
		"METRICS_ADDR=" + admin}, env...)...))
}

// TestProductionServesMetricsOnItsAdminListener: production's /metrics
// (every merchant's figures) is 404 problem+json on the API's port and 200
// on METRICS_ADDR, where the health probes answer too and the API does not;
// development keeps /metrics on the API's port.
func TestProductionServesMetricsOnItsAdminListener(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	admin := testkit.FreeAddr(t)
	prod := startProductionBinary(t, bin, admin)

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

// TestAdminListenerHasItsOwnCap: the admin listener takes at most
// METRICS_MAX_CONNS connections. With every one of them busy (here, sent
// nothing yet), a scrape is refused with 429 problem+json while the API's
// port serves on; once they are idle kept-alive connections, the one idle
// the longest yields its place to the scrape. Before, the admin listener
// took any number of connections, and answered Go's own refusals in plain
// text.
func TestAdminListenerHasItsOwnCap(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	admin := testkit.FreeAddr(t)
	prod := startProductionBinary(t, bin, admin, "METRICS_MAX_CONNS=4",
		// The held connections send nothing for a while; the server's
		// header deadline must not close them under the test.
		"HTTP_READ_HEADER_TIMEOUT=1m")
	const scrape = "GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n"

	held := make([]*bufio.Reader, 4)
	conns := make([]net.Conn, 4)
	for i := range held {
		c, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", admin)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
		conns[i], held[i] = c, bufio.NewReader(c)
	}
	resp, body := rawAnswer(t, &net.Dialer{}, admin, scrape)
	requireServerProblem(t, resp, body, http.StatusTooManyRequests, "too_many_connections")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Equal(t, 200, apptest.Call(t, "GET", prod.URL+"/healthz", "", "", "").Status, "the API's port has its own cap")

	for i, c := range conns {
		_, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")
		require.NoError(t, err)
		r, err := http.ReadResponse(held[i], nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, r.Body)
		require.Equal(t, 200, r.StatusCode)
	}
	resp, body = rawAnswer(t, &net.Dialer{}, admin, scrape)
	require.Equal(t, 200, resp.StatusCode, "an idle connection yields to the scrape: %s", body)
	require.Contains(t, string(body), "http_request_duration_seconds")

	// Go's own answers are problem+json there too.
	resp, body = rawAnswer(t, &net.Dialer{}, admin, "GET /metrics HTTP/1.1\r\n\r\n")
	requireServerProblem(t, resp, body, http.StatusBadRequest, "malformed_request")
}
