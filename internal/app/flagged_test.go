package app_test

import (
	"context"
	"database/sql"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/problem"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// flaggedWorld is an API binary and its provider, with a payment whose
// charge under our key is the wrong one (1 BRL for an order of 25.00), as a
// provider's mistake or a hand at its dashboard makes: flagged, waiting for
// an operator.
type flaggedWorld struct {
	api              *apptest.API
	bin, dbURL, prov string
	db               *sql.DB
	postgres         bool
	order, key, id   string
}

func newFlaggedWorld(t *testing.T, dialect database.Dialect) *flaggedWorld {
	t.Helper()
	apiBin, _ := apptest.Binaries(t)
	w := &flaggedWorld{bin: apiBin, dbURL: testkit.DatabaseURL(t, dialect), postgres: dialect == database.Postgres}
	prov, err := provider.StartInProcess(context.Background(), provider.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	w.prov = prov.URL
	w.api = apptest.StartBinary(t, apiBin, w.dbURL, apptest.Env("PROVIDER_URL="+prov.URL, "RECONCILE_INTERVAL=200ms",
		"IDEMPOTENCY_LOCK_TIMEOUT=2s", "PROVIDER_TIMEOUT=1s", "IDEMPOTENCY_WAIT=200ms"))
	conn, err := database.Open(w.dbURL, database.Options{MaxOpenConns: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	w.db, err = conn.DB.DB()
	require.NoError(t, err)

	// The first attempt does nothing at the provider (503): the payment
	// waits, ready, under its provider key.
	w.order, w.key = w.api.CreateOrder(t, "sk_test_acme"), apptest.NewKey()
	first := w.api.Pay(t, w.order, w.key, "pm_fault_unavailable")
	require.Equal(t, http.StatusBadGateway, first.Status, string(first.Body))
	w.id = first.JSON(t)["payment_id"].(string)
	var providerKey string
	require.NoError(t, w.db.QueryRow(`SELECT provider_key FROM payments WHERE id = `+w.arg(1), w.id).Scan(&providerKey))
	// Meanwhile a charge of 1 lands at the provider under that key.
	wrong := apptest.Send(t, apptest.Request{Method: "POST", URL: w.prov + "/v1/charges", Key: providerKey,
		Body: `{"amount":1,"currency":"BRL","payment_method":"pm_card_visa","reference":"` + w.id + `"}`})
	require.Equal(t, http.StatusCreated, wrong.Status, string(wrong.Body))
	// The client's retry meets it: the money check flags the call.
	retry := w.api.Pay(t, w.order, w.key, "pm_fault_unavailable")
	require.Equal(t, http.StatusAccepted, retry.Status, string(retry.Body))
	testkit.Eventually(t, 10*time.Second, "the call is flagged", func() bool {
		var state string
		require.NoError(t, w.db.QueryRow(`SELECT state FROM outside_calls WHERE id = `+w.arg(1), w.id).Scan(&state))
		return state == "flagged"
	})
	return w
}

func (w *flaggedWorld) arg(n int) string {
	if w.postgres {
		return "$" + string(rune('0'+n))
	}
	return "?"
}

// command runs the api binary's command args on the world's database.
func (w *flaggedWorld) command(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), w.bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+w.dbURL, "PROVIDER_URL="+w.prov, "LOG_LEVEL=error")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return string(out)
}

func (w *flaggedWorld) requireEvents(t *testing.T) { t.Helper(); requireEvents(t, w.dbURL) }

// requireEvents holds the outbox of the database at dbURL to its payments
// and refunds (testkit.AuditEvents).
func requireEvents(t *testing.T, dbURL string) {
	t.Helper()
	conn, err := database.Open(dbURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer conn.Close()
	sqlDB, err := conn.DB.DB()
	require.NoError(t, err)
	problems, err := testkit.AuditEvents(context.Background(), sqlDB, conn.Dialect == database.Postgres)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestFlaggedAcceptWritesItsEvent: api flagged accept applies the
// provider's answer and stores the key's answer, and, as every path that
// settles a payment, writes its event: the outbox holds payment.succeeded.
// Before, the command built a payments service without the outbox, and an
// accepted payment's order was paid with no event for fulfilment. A payment
// accepted so is repaired by api repair-events, once.
func TestFlaggedAcceptWritesItsEvent(t *testing.T) {
	testkit.EndToEnd(t)
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			w := newFlaggedWorld(t, d)
			out := w.command(t, "flagged", "accept", "-merchant", "mch_acme", "-id", w.id)
			require.Contains(t, out, "applied as it is")
			final := w.api.Pay(t, w.order, w.key, "pm_fault_unavailable")
			require.Equal(t, http.StatusCreated, final.Status, string(final.Body))
			require.Equal(t, "succeeded", final.JSON(t)["status"])
			w.requireEvents(t)

			// A payment an operator accepted before the commands wrote
			// events: its event is missing, and repair writes it once.
			_, err := w.db.Exec(`DELETE FROM outbox_events WHERE type = 'payment.succeeded'`)
			require.NoError(t, err)
			problems, err := testkit.AuditEvents(context.Background(), w.db, w.postgres)
			require.NoError(t, err)
			require.Len(t, problems, 1)
			require.Contains(t, w.command(t, "repair-events"), "wrote 1 missing outbox events")
			w.requireEvents(t)
			require.Contains(t, w.command(t, "repair-events"), "wrote 0 missing outbox events", "once")
			w.requireEvents(t)
		})
	}
}

// TestFlaggedFailRefundsTheWrongCharge: the way out of a wrong charge. api
// flagged fail fails the payment (its event written, its key answering 402
// payment_declined with decline code charge_mismatch), the provider's wrong
// charge is refunded automatically under a key derived from it, and the
// order can be paid again with a new key. Before, a new key met 409
// payment_in_progress for good, and accept paid the order for 1.
func TestFlaggedFailRefundsTheWrongCharge(t *testing.T) {
	testkit.EndToEnd(t)
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			w := newFlaggedWorld(t, d)
			blocked := w.api.Pay(t, w.order, apptest.NewKey(), "pm_card_visa")
			require.Equal(t, http.StatusConflict, blocked.Status, "the flagged payment blocks the order: %s", blocked.Body)

			out := w.command(t, "flagged", "fail", "-merchant", "mch_acme", "-id", w.id)
			require.Contains(t, out, "failed")
			declined := w.api.Pay(t, w.order, w.key, "pm_fault_unavailable")
			require.Equal(t, http.StatusPaymentRequired, declined.Status, string(declined.Body))
			require.Equal(t, problem.CodePaymentDeclined, answerCode(declined))
			require.Equal(t, "charge_mismatch", declined.JSON(t)["decline_code"])
			require.Equal(t, "true", declined.Header.Get("Idempotent-Replayed"), "the key's answer was stored by the command")

			var orphan string
			require.NoError(t, w.db.QueryRow(`SELECT id FROM orphans WHERE kind = 'charge' AND resource_id = `+w.arg(1), w.id).Scan(&orphan))
			testkit.Eventually(t, 20*time.Second, "the wrong charge is refunded", func() bool {
				refunds := apptest.Ledger(t, w.prov+"/v1/refunds?reference="+orphan)
				return len(refunds) == 1 && refunds[0]["status"] == "succeeded" && refunds[0]["amount"] == float64(1)
			})

			again := w.api.Pay(t, w.order, apptest.NewKey(), "pm_card_visa")
			require.Equal(t, http.StatusCreated, again.Status, "the order is payable again: %s", again.Body)
			o := apptest.Call(t, "GET", w.api.URL+"/v1/orders/"+w.order, "sk_test_acme", "", "").JSON(t)
			require.Equal(t, "paid", o["status"])
			w.requireEvents(t)
		})
	}
}
