package app_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestProductionRefusesADatabaseHoldingDemoKeys is the operator's path of
// issue 26: a database first served in development (demo seed on) is
// refused by production, which names the demo merchants and the command;
// after api revoke-demo-keys production starts, the public keys are 401,
// and /demo offers no key.
func TestProductionRefusesADatabaseHoldingDemoKeys(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			dbURL := testkit.DatabaseURL(t, dialect)
			dev := apptest.StartBinary(t, bin, dbURL)
			created := apptest.Call(t, "POST", dev.URL+"/v1/orders", "sk_test_acme", apptest.NewKey(), apptest.OrderBody)
			require.Equal(t, 201, created.Status, string(created.Body))
			page := apptest.Call(t, "GET", dev.URL+"/demo", "", "", "")
			require.Contains(t, string(page.Body), `value="sk_test_acme"`, "development's demo page is unchanged")
			dev.Process.Stop(10 * time.Second)

			prod := []string{"APP_ENV=production", "DEMO_SEED=", "PROVIDER_WEBHOOK_SECRET=" + prodWebhookSecret,
				"LOG_KEY_SECRET=" + prodLogKeySecret, "PROVIDER_KEY_SECRET=" + prodKeySecret, "DATABASE_URL=" + dbURL, "METRICS_ADDR=127.0.0.1:0"}
			command := func(args ...string) (string, error) {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, args...)
				cmd.Env = append([]string{"HTTP_ADDR=" + testkit.FreeAddr(t)}, prod...)
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			out, err := command()
			require.Error(t, err, "production started on a database holding the demo keys:\n%s", out)
			require.Contains(t, out, "demo merchants acme, globex")
			require.Contains(t, out, "api revoke-demo-keys")
			require.NotContains(t, out, "listening")
			require.NotContains(t, out, "sk_test_")

			out, err = command("revoke-demo-keys")
			require.NoError(t, err, out)
			require.Contains(t, out, "revoked the demo API keys of acme, globex")
			out, err = command("revoke-demo-keys")
			require.NoError(t, err, out)
			require.Contains(t, out, "no demo API key")

			api := apptest.StartBinary(t, bin, dbURL, apptest.Env(prod...))
			for _, key := range []string{"sk_test_acme", "sk_test_globex"} {
				denied := apptest.Call(t, "GET", api.URL+"/v1/orders", key, "", "")
				require.Equal(t, 401, denied.Status, "%s works in production", key)
			}
			page = apptest.Call(t, "GET", api.URL+"/demo", "", "", "")
			require.Equal(t, 200, page.Status)
			require.NotContains(t, string(page.Body), "sk_test_", "production's demo page offers a key")
			require.EqualValues(t, 1, api.Count(t, "SELECT count(*) FROM orders"), "the merchants' data stay")
		})
	}
}
