package app_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestRotatedKeySecretChargesOnce: a payment made under PROVIDER_KEY_SECRET
// A loses its rows (a failover to a standby that missed them), and the
// deployment changes the secret to B. An instance with B alone refuses to
// start, naming the settings, since calls of the last day were derived with
// A; with B and PROVIDER_KEY_SECRET_PREVIOUS=A it starts, and the client's
// retry finds the charge the provider holds under A's key instead of
// deriving a new one under B's: one charge for the order. Before, nothing
// noticed the change, and the retry charged the order twice.
func TestRotatedKeySecretChargesOnce(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	secret := func() string {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	a, b := secret(), secret()
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			dbURL := testkit.DatabaseURL(t, dialect)
			prov, err := provider.StartInProcess(context.Background(), provider.Config{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
			env := []string{"PROVIDER_URL=" + prov.URL}

			first := apptest.StartBinary(t, bin, dbURL, apptest.Env(append(env, "PROVIDER_KEY_SECRET="+a)...))
			lost, kept := first.CreateOrder(t, "sk_test_acme"), first.CreateOrder(t, "sk_test_acme")
			key := apptest.NewKey()
			paid := first.Pay(t, lost, key, "pm_card_visa")
			require.Equal(t, http.StatusCreated, paid.Status, string(paid.Body))
			payment := paid.JSON(t)["id"].(string)
			require.Equal(t, http.StatusCreated, first.Pay(t, kept, apptest.NewKey(), "pm_card_visa").Status)
			first.Process.Stop(10 * time.Second)

			// The failover's loss: the payment, its call, its key's record
			// and the order's move to paid.
			for _, stmt := range []string{
				"DELETE FROM payments WHERE id = '" + payment + "'",
				"DELETE FROM outside_calls WHERE id = '" + payment + "'",
				"DELETE FROM idempotency_records WHERE idempotency_key = '" + key + "'",
				"DELETE FROM outbox_events WHERE type LIKE 'payment.%'",
				"UPDATE orders SET status = 'pending_payment' WHERE id = '" + lost + "'",
			} {
				require.NoError(t, execURL(dbURL, stmt))
			}

			cmd := exec.CommandContext(t.Context(), bin)
			cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "HTTP_ADDR="+testkit.FreeAddr(t), "PROVIDER_URL="+prov.URL, "PROVIDER_KEY_SECRET="+b)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "started with another secret:\n%s", out)
			require.Contains(t, string(out), "PROVIDER_KEY_SECRET_PREVIOUS")
			require.NotContains(t, string(out), a, "the secret is never shown")
			require.NotContains(t, string(out), b)

			rotated := apptest.StartBinary(t, bin, dbURL, apptest.Env(append(env, "PROVIDER_KEY_SECRET="+b, "PROVIDER_KEY_SECRET_PREVIOUS="+a)...))
			again := rotated.Pay(t, lost, key, "pm_card_visa")
			require.Equal(t, http.StatusCreated, again.Status, string(again.Body))
			require.Equal(t, payment, again.JSON(t)["id"], "the retry found the operation under the old secret's key")
			require.Len(t, apptest.Ledger(t, prov.URL+"/v1/charges?reference="+payment), 1, "charged once")
			// A new operation derives under the new secret.
			fresh := rotated.Pay(t, rotated.CreateOrder(t, "sk_test_acme"), apptest.NewKey(), "pm_card_visa")
			require.Equal(t, http.StatusCreated, fresh.Status)
			require.EqualValues(t, 2, rotated.Count(t, "SELECT count(DISTINCT key_fingerprint) FROM outside_calls"))
		})
	}
}

// execURL runs one statement on the database at dbURL.
func execURL(dbURL, stmt string) error {
	conn, err := database.Open(dbURL, database.Options{MaxOpenConns: 1})
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Exec(stmt).Error
}
