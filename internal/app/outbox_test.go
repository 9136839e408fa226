package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/outbox"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestOutboxDeliversAtLeastOnce writes events in the business transactions,
// lets the dispatcher publish them to a Redis stream, then makes it publish
// everything again (as after a crash between publish and mark): the stream
// holds every event twice, each entry with its event id.
func TestOutboxDeliversAtLeastOnce(t *testing.T) {
	rs := testkit.StartRedis(t)
	w := apptest.Start(t, testkit.DatabaseURL(t, database.Postgres), apptest.WithProvider(provider.Config{DuplicateWebhookRate: -1}), apptest.Env("REDIS_URL="+rs.URL(), "OUTBOX_INTERVAL=50ms"))
	ctx := context.Background()

	order := w.CreateOrder(t, "sk_test_acme")
	require.Equal(t, 201, w.Pay(t, order, apptest.NewKey(), "pm_card_visa").Status)
	declinedOrder := w.CreateOrder(t, "sk_test_acme")
	require.Equal(t, 402, w.Pay(t, declinedOrder, apptest.NewKey(), "pm_card_declined").Status)
	const events = 4 // two order.created, payment.succeeded, payment.failed

	require.EqualValues(t, events, w.Count(t, "SELECT count(*) FROM outbox_events"))
	testkit.Eventually(t, 10*time.Second, "all events published", func() bool {
		return w.Count(t, "SELECT count(*) FROM outbox_events WHERE published_at IS NULL") == 0
	})
	require.EqualValues(t, events, rs.Client(t).XLen(ctx, outbox.StreamKey).Val())

	// As if the dispatcher died after publishing and before marking.
	db, err := database.Open(w.DatabaseURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	require.NoError(t, db.Exec("UPDATE outbox_events SET published_at = NULL").Error)
	_ = db.Close()
	testkit.Eventually(t, 10*time.Second, "published again", func() bool {
		return rs.Client(t).XLen(ctx, outbox.StreamKey).Val() == 2*events
	})

	// Each event twice, with its fields: what a consumer deduplicates on
	// (examples/outbox-consumer, whose tests kill it mid-stream).
	entries, err := rs.Client(t).XRange(ctx, outbox.StreamKey, "-", "+").Result()
	require.NoError(t, err)
	perEvent := map[string]int{}
	types := map[string]int{}
	for _, e := range entries {
		perEvent[e.Values[outbox.FieldEventID].(string)]++
		types[e.Values[outbox.FieldType].(string)]++
		require.NotEmpty(t, e.Values[outbox.FieldMerchantID])
		require.NotEmpty(t, e.Values[outbox.FieldPayload])
	}
	require.Len(t, perEvent, events)
	for id, n := range perEvent {
		require.Equal(t, 2, n, id)
	}
	require.Equal(t, map[string]int{"order.created": 4, "payment.succeeded": 2, "payment.failed": 2}, types)
}

// TestOutboxWithoutRedisDrainsToTheLog: with Redis off the events are still
// written with their changes and drained (to the log).
func TestOutboxWithoutRedisDrainsToTheLog(t *testing.T) {
	w := apptest.Start(t, testkit.DatabaseURL(t, database.SQLite), apptest.WithProvider(provider.Config{DuplicateWebhookRate: -1}), apptest.Env("OUTBOX_INTERVAL=50ms"))
	w.CreateOrder(t, "sk_test_acme")
	require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM outbox_events WHERE type = 'order.created'"))
	testkit.Eventually(t, 10*time.Second, "drained", func() bool {
		return w.Count(t, "SELECT count(*) FROM outbox_events WHERE published_at IS NULL") == 0
	})
}
