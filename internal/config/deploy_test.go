package config_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/config"
)

// root is the repository, two folders up from this package.
const root = "../.."

// envFile reads KEY=value lines, skipping comments and blanks.
func envFile(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var env []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			env = append(env, line)
		}
	}
	return env
}

// TestComposeRunsProduction: docker-compose.yml takes the API's secrets from
// the git-ignored deploy/compose.env and sets no demo seed or test secret
// itself; the file that make compose-env writes starts production, with the
// provider's secret equal to the API's; the committed example, left as it
// is, is refused by name.
func TestComposeRunsProduction(t *testing.T) {
	compose, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(compose), "env_file: deploy/compose.env"), "the API, the ha profile's API and the provider read the secrets file")
	for _, banned := range []string{"whsec_test", "DEMO_SEED:", "APP_ENV:", "LOG_KEY_SECRET:", "PROVIDER_WEBHOOK_SECRET:", "WEBHOOK_SECRET:"} {
		require.NotContains(t, string(compose), banned)
	}
	ignored, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	require.NoError(t, err)
	require.Contains(t, string(ignored), "/deploy/compose.env\n")

	example := envFile(t, filepath.Join(root, "deploy/compose.env.example"))
	_, err = config.Load(example)
	require.ErrorContains(t, err, "LOG_KEY_SECRET must be set in production")
	require.ErrorContains(t, err, "PROVIDER_WEBHOOK_SECRET")

	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not found: scripts/compose-env.sh needs it")
	}
	out := filepath.Join(t.TempDir(), "compose.env")
	script, err := exec.Command(filepath.Join(root, "scripts/compose-env.sh"), out).CombinedOutput()
	require.NoError(t, err, string(script))
	made := envFile(t, out)
	cfg, err := config.Load(made)
	require.NoError(t, err)
	require.True(t, cfg.Production())
	require.False(t, cfg.DemoSeed)
	require.Contains(t, made, "WEBHOOK_SECRET="+cfg.ProviderWebhookSecret, "the provider signs with the secret the API checks")
	again, err := exec.Command(filepath.Join(root, "scripts/compose-env.sh"), out).CombinedOutput()
	require.Error(t, err, "an existing secrets file is never overwritten")
	require.Contains(t, string(again), "exists")
}
