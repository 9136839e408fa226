package app_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestFlaggedCommand: api flagged lists what waits for an operator and
// resolves an orphan handled by hand; a wrong use says what is missing and
// changes nothing. (Retry and accept are proven on the keeper, in
// internal/payments' TestFlaggedChargeWaitsForAnOperator.)
func TestFlaggedCommand(t *testing.T) {
	for _, d := range testkit.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, d)
			cfg, err := config.Load([]string{"DATABASE_URL=" + dbURL})
			require.NoError(t, err)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			flagged := func(args ...string) (string, error) {
				var out bytes.Buffer
				err := app.Flagged(context.Background(), cfg, log, args, &out)
				return out.String(), err
			}

			out, err := flagged()
			require.NoError(t, err)
			require.Contains(t, out, "flagged calls: 0")
			require.Contains(t, out, "orphans: 0")

			now := time.Now().UTC()
			exec := func(q string, args ...any) {
				t.Helper()
				conn, err := database.Open(dbURL, database.Options{MaxOpenConns: 1})
				require.NoError(t, err)
				defer conn.Close()
				require.NoError(t, conn.Exec(q, args...).Error)
			}
			exec(`INSERT INTO orphans (merchant_id, id, kind, resource_id, provider_id, amount, currency, status, provider_key,
    provider_refund_id, note, created_at, updated_at) VALUES ('mer_x', 'orf_1', 'refund', 're_ours', 're_theirs', 2500, 'BRL',
    'flagged', '', '', 'a refund cannot be undone automatically', ?, ?)`, now, now)

			out, err = flagged("list")
			require.NoError(t, err)
			require.Contains(t, out, "orphans: 1")
			require.Contains(t, out, "orf_1")
			require.Contains(t, out, "2500 BRL")

			_, err = flagged("resolve", "-merchant", "mer_x")
			require.ErrorContains(t, err, "-merchant and -id are required")
			_, err = flagged("accept", "-merchant", "mer_x", "-id", "pay_1")
			require.ErrorContains(t, err, "PROVIDER_URL")
			_, err = flagged("undo")
			require.ErrorContains(t, err, `unknown action "undo"`)
			_, err = flagged("resolve", "-merchant", "mer_y", "-id", "orf_1")
			require.ErrorContains(t, err, "not found", "another merchant's")
			require.EqualValues(t, 1, testkit.Count(t, dbURL, "SELECT count(*) FROM orphans WHERE status = 'flagged'"), "nothing changed")

			out, err = flagged("resolve", "-merchant", "mer_x", "-id", "orf_1")
			require.NoError(t, err)
			require.Contains(t, out, "orphan orf_1 resolved")
			out, err = flagged()
			require.NoError(t, err)
			require.Contains(t, out, "orphans: 0")
			_, err = flagged("resolve", "-merchant", "mer_x", "-id", "orf_1")
			require.ErrorContains(t, err, "not flagged")
		})
	}
}
