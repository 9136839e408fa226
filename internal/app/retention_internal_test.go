package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/outbox"
	"github.com/idemkeys/payments/internal/payments/paymentsdb"
	"github.com/idemkeys/payments/internal/testkit"
)

// insertRows adds n rows to table with values made by row(i), in
// statements of at most 200 rows.
func insertRows(t *testing.T, db *database.DB, table, columns string, n int, row func(i int) []any) {
	t.Helper()
	for start := 0; start < n; start += 200 {
		var places []string
		var args []any
		for i := start; i < min(n, start+200); i++ {
			vals := row(i)
			places = append(places, "("+strings.TrimSuffix(strings.Repeat("?,", len(vals)), ",")+")")
			args = append(args, vals...)
		}
		require.NoError(t, db.Exec("INSERT INTO "+table+" ("+columns+") VALUES "+strings.Join(places, ","), args...).Error)
	}
}

// TestRetentionPurgesOldRowsInBatches: published outbox events and webhook
// inbox rows older than the retention go, in batches of the configured
// size, oldest first; recent rows and unpublished events, however old,
// stay.
func TestRetentionPurgesOldRowsInBatches(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			db := testkit.OpenDB(t, dialect)
			now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
			old, recent := now.Add(-8*24*time.Hour), now.Add(-time.Hour)
			const oldPublished, oldUnpublished, recentPublished = 1234, 7, 11
			const oldHooks, recentHooks = 1001, 5
			cols := "merchant_id, id, type, payload, created_at, published_at"
			insertRows(t, db, "outbox_events", cols, oldPublished, func(i int) []any {
				at := old.Add(time.Duration(i) * time.Second)
				return []any{"mch_acme", fmt.Sprintf("evt_old_%d", i), "order.created", "{}", at, at}
			})
			insertRows(t, db, "outbox_events", cols, oldUnpublished, func(i int) []any {
				return []any{"mch_acme", fmt.Sprintf("evt_waiting_%d", i), "order.created", "{}", old, nil}
			})
			insertRows(t, db, "outbox_events", cols, recentPublished, func(i int) []any {
				return []any{"mch_globex", fmt.Sprintf("evt_new_%d", i), "order.created", "{}", recent, recent}
			})
			insertRows(t, db, "webhook_events", "event_id, type, received_at", oldHooks, func(i int) []any {
				return []any{fmt.Sprintf("evt_hook_old_%d", i), "charge.succeeded", old.Add(time.Duration(i) * time.Second)}
			})
			insertRows(t, db, "webhook_events", "event_id, type, received_at", recentHooks, func(i int) []any {
				return []any{fmt.Sprintf("evt_hook_new_%d", i), "charge.succeeded", recent}
			})

			dispatcher := outbox.NewDispatcher(db.DB, nil, time.Hour, slog.Default())
			store := paymentsdb.New(db.DB)
			batches := map[string][]int{}
			counted := func(name string, purge func(context.Context, time.Time, int) (int, error)) retentionPurge {
				return retentionPurge{name: name, purge: func(ctx context.Context, before time.Time, limit int) (int, error) {
					n, err := purge(ctx, before, limit)
					batches[name] = append(batches[name], n)
					return n, err
				}}
			}
			r := &retention{
				keep: 7 * 24 * time.Hour, interval: time.Hour, batch: 500, pause: time.Millisecond,
				now: func() time.Time { return now }, log: slog.Default(),
				purges: []retentionPurge{counted("outbox_events", dispatcher.PurgePublished), counted("webhook_events", store.PurgeWebhookEvents)},
			}
			deleted := r.purgeOnce(t.Context())
			require.Equal(t, map[string]int{"outbox_events": oldPublished, "webhook_events": oldHooks}, deleted)
			require.Equal(t, []int{500, 500, 234}, batches["outbox_events"])
			require.Equal(t, []int{500, 500, 1}, batches["webhook_events"])

			count := func(q string) (n int64) {
				require.NoError(t, db.Raw(q).Scan(&n).Error)
				return n
			}
			require.EqualValues(t, oldUnpublished, count("SELECT count(*) FROM outbox_events WHERE published_at IS NULL"), "an unpublished event is never purged")
			require.EqualValues(t, recentPublished, count("SELECT count(*) FROM outbox_events WHERE published_at IS NOT NULL"))
			require.EqualValues(t, recentHooks, count("SELECT count(*) FROM webhook_events"))
			require.Zero(t, count("SELECT count(*) FROM webhook_events WHERE event_id LIKE 'evt_hook_old_%'"))

			// Nothing left to purge: one short batch each.
			clear(batches)
			require.Equal(t, map[string]int{"outbox_events": 0, "webhook_events": 0}, r.purgeOnce(t.Context()))
			require.Equal(t, []int{0}, batches["outbox_events"])
		})
	}
}
