package app_test

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// Production secrets for the tests, made once as operators make them
// (a PSP's whsec_ secret, openssl rand -hex 32, openssl rand -base64 32).
var (
	prodWebhookSecret = "whsec_atJNNovBlj2HCUrjxBG1j2j4J6h/jmPs"
	prodLogKeySecret  = "f529c8c6f56d350cfa60122cf7c636ee11a9cd4ffcfadeb2c69c2a4ebfe2c43a"
	prodKeySecret     = "/GqTsuEkvOAexHSsNklNmLFvFMe+U4hmHugHIGtiZ48="
)

// TestProductionRefusesEachBadSettingAtStart runs the binary as an operator
// would, with APP_ENV=production and one setting that only development may
// use: it exits at once, naming the setting, and never prints a secret.
func TestProductionRefusesEachBadSettingAtStart(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	dbURL := "sqlite:" + t.TempDir() + "/payments.db"
	good := []string{"APP_ENV=production", "DATABASE_URL=" + dbURL, "HTTP_ADDR=" + testkit.FreeAddr(t),
		"PROVIDER_WEBHOOK_SECRET=" + prodWebhookSecret, "LOG_KEY_SECRET=" + prodLogKeySecret, "PROVIDER_KEY_SECRET=" + prodKeySecret,
		"METRICS_ADDR=127.0.0.1:0"}
	cases := map[string]struct {
		env  []string
		want string
	}{
		"demo seed":              {[]string{"DEMO_SEED=true"}, "DEMO_SEED"},
		"test webhook secret":    {[]string{"PROVIDER_WEBHOOK_SECRET=whsec_test"}, "PROVIDER_WEBHOOK_SECRET"},
		"short webhook secret":   {[]string{"PROVIDER_WEBHOOK_SECRET=whsec_short_secret"}, "PROVIDER_WEBHOOK_SECRET must be at least 32 bytes"},
		"no log key secret":      {[]string{"LOG_KEY_SECRET="}, "LOG_KEY_SECRET"},
		"no provider key secret": {[]string{"PROVIDER_KEY_SECRET="}, "PROVIDER_KEY_SECRET"},
		"padded webhook secret":  {[]string{"PROVIDER_WEBHOOK_SECRET=whsec_test" + strings.Repeat(" ", 22)}, "PROVIDER_WEBHOOK_SECRET is too weak for production"},
		"repetitive log secret":  {[]string{"LOG_KEY_SECRET=" + strings.Repeat("a", 32)}, "LOG_KEY_SECRET is too weak for production"},
		"repetitive key secret":  {[]string{"PROVIDER_KEY_SECRET=" + strings.Repeat("ab", 16)}, "PROVIDER_KEY_SECRET is too weak for production"},
		// The guessable secrets, which the character-frequency
		// measure let through.
		"alphabet and digits":   {[]string{"PROVIDER_KEY_SECRET=ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}, "PROVIDER_KEY_SECRET is too weak for production"},
		"lower alphabet":        {[]string{"LOG_KEY_SECRET=abcdefghijklmnopqrstuvwxyz012345"}, "LOG_KEY_SECRET is too weak for production"},
		"a repeat, one changed": {[]string{"PROVIDER_KEY_SECRET=0123456789abcdef0123456789abcdeg"}, "PROVIDER_KEY_SECRET is too weak for production"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin)
			cmd.Env = append(append([]string{}, good...), tc.env...)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "production started with %v:\n%s", tc.env, out)
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			require.Equal(t, 1, exit.ExitCode())
			require.Contains(t, string(out), tc.want)
			require.NotContains(t, string(out), "listening")
			for _, secret := range []string{prodWebhookSecret, prodLogKeySecret, prodKeySecret, "whsec_short_secret"} {
				require.NotContains(t, string(out), secret)
			}
		})
	}
}

// TestProductionStartsWithGoodSettings: with its two secrets production
// starts (in-process provider, SQLite or PostgreSQL, no Redis), the demo keys
// do not work there, and a merchant made with create-merchant does.
func TestProductionStartsWithGoodSettings(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			dbURL := testkit.DatabaseURL(t, dialect)
			prod := []string{"APP_ENV=production", "DEMO_SEED=", "PROVIDER_WEBHOOK_SECRET=" + prodWebhookSecret, "LOG_KEY_SECRET=" + prodLogKeySecret,
				"PROVIDER_KEY_SECRET=" + prodKeySecret, "METRICS_ADDR=127.0.0.1:0"}
			// DEMO_SEED= unsets the tests' default: production then
			// seeds nothing.
			api := apptest.StartBinary(t, bin, dbURL, apptest.Env(append(prod, "LOG_LEVEL=info")...))
			require.NotContains(t, api.Logs(), "development mode")
			require.Eventually(t, func() bool { return strings.Contains(api.Logs(), `"listening"`) }, 10*time.Second, 20*time.Millisecond)
			require.NotContains(t, api.Logs(), "swagger_ui", "production's start lines are development's")

			denied := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", apptest.NewKey(), apptest.OrderBody)
			require.Equal(t, 401, denied.Status, "the public demo key works in production")
			require.Zero(t, api.Count(t, "SELECT count(*) FROM merchants"))
			ledger := apptest.Call(t, "GET", api.URL+"/dev/provider/v1/ledger", "", "", "")
			require.Equal(t, 404, ledger.Status, "production serves the in-process provider's ledger")

			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "create-merchant", "-name", "shop")
			cmd.Env = append([]string{"DATABASE_URL=" + dbURL}, prod...)
			out, err := cmd.Output()
			require.NoError(t, err, string(out))
			key := regexp.MustCompile(`sk_live_[0-9a-f]{32}`).FindString(string(out))
			require.NotEmpty(t, key, string(out))

			created := apptest.Call(t, "POST", api.URL+"/v1/orders", key, apptest.NewKey(), apptest.OrderBody)
			require.Equal(t, 201, created.Status, string(created.Body))
			require.NotContains(t, api.Logs(), key, "the log holds an API key")
		})
	}
}

// TestDevelopmentSaysWhatIsInForce: the default environment starts with
// the demo merchants and the test secret, and says so once at start,
// naming the settings without printing a key or a secret.
func TestDevelopmentSaysWhatIsInForce(t *testing.T) {
	testkit.EndToEnd(t)
	api := apptest.Start(t, testkit.DatabaseURL(t, database.SQLite), apptest.Env("LOG_LEVEL=info"))
	var logs string
	require.Eventually(t, func() bool { logs = api.Logs(); return strings.Contains(logs, `"swagger_ui"`) }, 10*time.Second, 20*time.Millisecond,
		"development says where the API, Swagger UI and the demo are:\n%s", api.Logs())
	require.Contains(t, logs, "development mode (APP_ENV=development)")
	require.Contains(t, logs, `"swagger_ui":"`+api.URL+`/swagger/index.html"`)
	require.Contains(t, logs, `"demo":"`+api.URL+`/demo"`)
	require.Contains(t, logs, `"provider_ledger":"`+api.URL+`/dev/provider/v1/ledger"`)
	require.Contains(t, logs, "DEMO_SEED")
	require.Contains(t, logs, "PROVIDER_WEBHOOK_SECRET")
	for _, secret := range []string{"sk_test_acme", "sk_test_globex", "whsec_test"} {
		require.NotContains(t, logs, secret)
	}
	ok := apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", apptest.NewKey(), apptest.OrderBody)
	require.Equal(t, 201, ok.Status, string(ok.Body))
	ledger := apptest.Call(t, "GET", api.URL+"/dev/provider/v1/ledger", "", "", "")
	require.Equal(t, 200, ledger.Status, "development serves the in-process provider's ledger")
}

// TestDevelopmentFirstScreen: started as `make run` starts it, the API's
// first lines are for a person: the pages to open, where the demo keys are
// written down, then what is not for production; the in-process provider's
// own port is not among them.
func TestDevelopmentFirstScreen(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	api := apptest.StartBinary(t, bin, testkit.DatabaseURL(t, database.SQLite), apptest.Env("LOG_FORMAT=", "LOG_LEVEL=info"))
	var logs string
	require.Eventually(t, func() bool { logs = api.Logs(); return strings.Contains(logs, "listening") }, 10*time.Second, 20*time.Millisecond)
	lines := strings.Split(logs, "\n")
	require.Contains(t, lines[0], "Development mode. Open in a browser:", logs)
	require.Contains(t, lines[1], api.URL+"/demo", logs)
	require.Contains(t, logs, "API keys are in the README")
	require.NotContains(t, logs, `"msg"`, "development's log is text")
	for _, u := range regexp.MustCompile(`https?://[^\s"]+`).FindAllString(logs, -1) {
		require.True(t, strings.HasPrefix(u, api.URL), "an address to open that is not the API's: %s\n%s", u, logs)
	}
}
