package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestPathOfOneRequest records the code that one request runs, for
// docs/design/operation.md's measured path (make path). PATH_API_BINARY is
// cmd/api built with coverage (go build -cover); it is run three times on
// one PostgreSQL database, each time with GOCOVERDIR set to its own
// directory under PATH_PROFILE_DIR and stopped gracefully, so that it
// writes its counters: "base" serves a warm-up order and payment;
// "create" the same and then one order's create (Atomic); "payment" the
// same again and then that order's payment (Guarded, with the provider's
// call). tools/pathcount subtracts one profile from the next: what is left
// is the one request's code. The workers are slowed to an hour and the
// provider (in this process, outside the profile) sends no webhooks, so
// nothing else runs between the runs' requests. Without the two settings
// it is skipped.
func TestPathOfOneRequest(t *testing.T) {
	bin, dir := os.Getenv("PATH_API_BINARY"), os.Getenv("PATH_PROFILE_DIR")
	if bin == "" || dir == "" {
		t.Skip("PATH_API_BINARY and PATH_PROFILE_DIR are not set (make path sets them)")
	}
	prov, err := provider.StartInProcess(context.Background(), provider.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	dbURL := testkit.DatabaseURL(t, database.Postgres)

	for i, run := range []string{"base", "create", "payment"} {
		out := filepath.Join(dir, run)
		require.NoError(t, os.MkdirAll(out, 0o755))
		api := apptest.StartBinary(t, bin, dbURL, apptest.Env("GOCOVERDIR="+out, "PROVIDER_URL="+prov.URL,
			"RECONCILE_INTERVAL=1h", "OUTBOX_INTERVAL=1h", "JANITOR_INTERVAL=1h"))
		warm := api.CreateOrder(t, "sk_test_acme")
		require.Equal(t, 201, api.Pay(t, warm, apptest.NewKey(), "pm_card_visa").Status)
		if i >= 1 {
			order := api.CreateOrder(t, "sk_test_acme")
			if i >= 2 {
				paid := api.Pay(t, order, apptest.NewKey(), "pm_card_visa")
				require.Equal(t, 201, paid.Status, string(paid.Body))
			}
		}
		api.Process.Stop(30 * time.Second)
		entries, err := os.ReadDir(out)
		require.NoError(t, err)
		require.NotEmpty(t, entries, "%s wrote no coverage: is PATH_API_BINARY built with -cover?", run)
	}
}
