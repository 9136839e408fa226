package app_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/merchants"
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

// TestProductionRefusesDemoKeysThatArriveLater is issue 46's replica: a
// production instance runs on a database without demo keys, then an
// instance started without APP_ENV=production seeds them into it. The
// public keys stay 401 unauthorized, before the negative cache lets go of
// sk_test_acme and after (a fresh read finds the key and refuses it), and
// the log holds one warning naming the demo merchants, never a key.
func TestProductionRefusesDemoKeysThatArriveLater(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			dbURL := testkit.DatabaseURL(t, dialect)
			admin := "http://" + testkit.FreeAddr(t)
			api := apptest.StartBinary(t, bin, dbURL, apptest.Env("APP_ENV=production", "DEMO_SEED=",
				"PROVIDER_WEBHOOK_SECRET="+prodWebhookSecret, "LOG_KEY_SECRET="+prodLogKeySecret, "PROVIDER_KEY_SECRET="+prodKeySecret,
				"METRICS_ADDR="+strings.TrimPrefix(admin, "http://")))
			unauthorized := func(method, key, body string) {
				t.Helper()
				idem := ""
				if method == "POST" {
					idem = apptest.NewKey()
				}
				a := apptest.Call(t, method, api.URL+"/v1/orders", key, idem, body)
				testkit.RequireProblem(t, a.Status, a.Header, a.Body, 401, "unauthorized")
			}
			unauthorized("GET", "sk_test_acme", "") // now in the negative cache

			replica, err := database.Open(dbURL, database.Options{MaxOpenConns: 1})
			require.NoError(t, err)
			require.NoError(t, merchants.NewStore(replica.DB, nil).SeedDemo(t.Context()), "the replica seeds the demo merchants")
			require.NoError(t, replica.Close())
			require.EqualValues(t, 2, api.Count(t, "SELECT count(*) FROM api_keys"))

			unauthorized("POST", "sk_test_globex", apptest.OrderBody)
			unauthorized("GET", "sk_test_acme", "")
			demo := keyLookupsAt(t, admin, "demo")
			require.Equal(t, 1, demo, "globex was read from the database and refused")
			// Until the negative cache lets go of acme and a read finds
			// its key, acme keeps being asked: every answer is 401.
			testkit.Eventually(t, merchants.UnknownKeyTTL+30*time.Second, "a database read of sk_test_acme", func() bool {
				unauthorized("GET", "sk_test_acme", "")
				return keyLookupsAt(t, admin, "demo") > demo
			})
			unauthorized("POST", "sk_test_globex", apptest.OrderBody)
			require.Zero(t, api.Count(t, "SELECT count(*) FROM orders"))

			logs := api.Logs()
			warning := "refuses the public API keys of demo merchants"
			require.Equal(t, 1, strings.Count(logs, warning), "one warning, however many requests:\n%s", logs)
			require.Contains(t, logs, `"demo_merchants":"acme, globex"`)
			require.Contains(t, logs, "api revoke-demo-keys")
			require.NotContains(t, logs, "sk_test_")
		})
	}
}
