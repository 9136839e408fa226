package app_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestProductionInProcessProviderIsInMemory: with PROVIDER_URL empty in
// production, the mock provider opens no listener (the process listens on
// its API and admin ports only), still charges and answers through memory,
// and refuses the pm_fault_* methods that would let a client make it lose
// answers or hold a payment. Development keeps its loopback provider and
// its fault methods.
func TestProductionInProcessProviderIsInMemory(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	dbURL := testkit.DatabaseURL(t, database.SQLite)
	prod := []string{"APP_ENV=production", "DEMO_SEED=", "PROVIDER_WEBHOOK_SECRET=" + prodWebhookSecret,
		"LOG_KEY_SECRET=" + prodLogKeySecret, "PROVIDER_KEY_SECRET=" + prodKeySecret, "DATABASE_URL=" + dbURL,
		"METRICS_ADDR=" + testkit.FreeAddr(t)}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "create-merchant", "-name", "shop")
	cmd.Env = append([]string{"HTTP_ADDR=" + testkit.FreeAddr(t)}, prod...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	apiKey := regexp.MustCompile(`sk_live_[0-9a-f]{32}`).FindString(string(out))
	require.NotEmpty(t, apiKey, "no API key in %s", out)

	api := apptest.StartBinary(t, bin, dbURL, apptest.Env(prod...))
	require.Equal(t, 2, listeners(t, api.Process.Pid()), "the API's and the admin listener, no provider's")

	order := apptest.Call(t, "POST", api.URL+"/v1/orders", apiKey, apptest.NewKey(), apptest.OrderBody)
	require.Equal(t, 201, order.Status, string(order.Body))
	orderID := order.JSON(t)["id"].(string)
	pay := func(method string) apptest.Answer {
		return apptest.Call(t, "POST", api.URL+"/v1/orders/"+orderID+"/payments", apiKey, apptest.NewKey(), `{"payment_method":"`+method+`"}`)
	}
	faulty := pay("pm_fault_lost_response")
	require.NotEqual(t, 201, faulty.Status, string(faulty.Body))
	require.NotEqual(t, 202, faulty.Status, "a fault method reached the mock's fault: %s", faulty.Body)
	require.EqualValues(t, 0, api.Count(t, "SELECT count(*) FROM payments WHERE status IN ('succeeded', 'processing')"))

	paid := pay("pm_card_visa")
	require.Equal(t, 201, paid.Status, string(paid.Body))
	require.Equal(t, "succeeded", paid.JSON(t)["status"])
	require.EqualValues(t, 1, api.Count(t, "SELECT count(*) FROM payments WHERE status = 'succeeded'"))

	dev := apptest.StartBinary(t, bin, testkit.DatabaseURL(t, database.SQLite))
	require.Equal(t, 2, listeners(t, dev.Process.Pid()), "development: the API's and the loopback provider's")
}

// listeners counts the TCP sockets in LISTEN state that process pid holds,
// from /proc: its open socket inodes against /proc/net/tcp and tcp6.
func listeners(t *testing.T, pid int) int {
	t.Helper()
	listening := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 9 && f[3] == "0A" { // LISTEN
				listening[f[9]] = true
			}
		}
	}
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	require.NoError(t, err)
	n := 0
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") && listening[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			n++
		}
	}
	return n
}
