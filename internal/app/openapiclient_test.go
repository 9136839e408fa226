package app_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	// The generated client's runtime library, imported here only so that
	// go.mod pins it (go mod tidy keeps what tests import) and go.sum holds
	// it: the temporary module the client is built in takes both as they
	// are, and builds offline.
	_ "github.com/oapi-codegen/runtime"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestGeneratedClientRoundTrip drives the real API, on each dialect, with
// a Go client that oapi-codegen v2.8.2 (a tool of go.mod) generates from
// the committed document, untouched: the proof that a generator takes the
// document as it is, and that its types decode every answer. The client is
// generated into a temporary module, never into the project, so that
// `go build ./...` and `go vet ./...` do not compile its thousands of
// lines; the round trip it runs is testdata/openapiclient/roundtrip_test.go.
func TestGeneratedClientRoundTrip(t *testing.T) {
	testkit.EndToEnd(t)
	suite := buildGeneratedClientSuite(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			api := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithSilentProvider(provider.Config{}))
			run := exec.CommandContext(context.Background(), suite, "-test.count=1", "-test.v")
			run.Env = append(os.Environ(), "API_URL="+api.URL, "API_KEY=sk_test_acme")
			out, err := run.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "--- PASS: TestRoundTrip", "the round trip ran:\n%s", out)
		})
	}
}

// buildGeneratedClientSuite generates the client into a temporary module
// (this module's go.mod and go.sum under another name, so that the client
// builds with the very versions pinned here, offline), puts the round trip
// beside it, and compiles that test into a binary it returns.
func buildGeneratedClientSuite(t *testing.T) string {
	t.Helper()
	root := testkit.RepoFile(t, "")
	dir := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	first, rest, ok := strings.Cut(string(gomod), "\n")
	require.True(t, ok && strings.HasPrefix(first, "module "), "go.mod starts with its module line")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module roundtrip\n"+rest), 0o644))
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), gosum, 0o644))

	pkg := filepath.Join(dir, "openapiclient")
	require.NoError(t, os.Mkdir(pkg, 0o755))
	goCmd(t, root, "tool", "oapi-codegen", "-generate", "types,client", "-package", "openapiclient",
		"-o", filepath.Join(pkg, "openapi.gen.go"), "api/swagger.json")
	roundTrip, err := os.ReadFile(testkit.RepoFile(t, "internal/app/testdata/openapiclient/roundtrip_test.go"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(pkg, "roundtrip_test.go"), roundTrip, 0o644))
	suite := filepath.Join(dir, "roundtrip.test")
	goCmd(t, dir, "test", "-c", "-o", suite, "./openapiclient")
	return suite
}

// goCmd runs the go command in dir and fails the test with its output.
func goCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), "go", args...)
	cmd.Dir = dir
	// A go.work above the temporary folder must not take the module over.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
}
