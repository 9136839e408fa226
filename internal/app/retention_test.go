package app_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestRetentionRunsInTheProgram: the running API purges published outbox
// events and webhook inbox rows older than EVENT_RETENTION (the default, a
// week) and keeps its own recent ones.
func TestRetentionRunsInTheProgram(t *testing.T) {
	testkit.EndToEnd(t)
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			db, err := database.Open(dbURL, database.Options{MaxOpenConns: 2})
			require.NoError(t, err)
			defer db.Close()
			old := time.Now().UTC().Add(-8 * 24 * time.Hour)
			for i := range 1200 {
				require.NoError(t, db.Exec(`INSERT INTO outbox_events (merchant_id, id, type, payload, created_at, published_at) VALUES (?, ?, 'order.created', '{}', ?, ?)`,
					"mch_acme", fmt.Sprintf("evt_old_%d", i), old, old).Error)
			}
			require.NoError(t, db.Exec(`INSERT INTO webhook_events (event_id, type, received_at) VALUES ('evt_hook_old', 'charge.succeeded', ?)`, old).Error)

			api := apptest.Start(t, dbURL, apptest.Env("JANITOR_INTERVAL=200ms", "OUTBOX_INTERVAL=50ms"))
			api.CreateOrder(t, "sk_test_acme")
			testkit.Eventually(t, 60*time.Second, "the old rows purged and the new event published", func() bool {
				return api.Count(t, "SELECT count(*) FROM outbox_events WHERE id LIKE 'evt_old_%'") == 0 &&
					api.Count(t, "SELECT count(*) FROM webhook_events") == 0 &&
					api.Count(t, "SELECT count(*) FROM outbox_events WHERE published_at IS NOT NULL") == 1
			})
			require.EqualValues(t, 1, api.Count(t, "SELECT count(*) FROM outbox_events"), "the order's own event stays")
		})
	}
}
