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
	"github.com/idemkeys/payments/internal/redisconn"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestOutboxDeliversAtLeastOnceAndTheConsumerAppliesOnce writes events in the
// business transactions, lets the dispatcher publish them to a Redis stream,
// then makes it publish everything again (as after a crash between publish
// and mark): the stream holds duplicates, the consumer applies each event
// once.
func TestOutboxDeliversAtLeastOnceAndTheConsumerAppliesOnce(t *testing.T) {
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

	client, err := redisconn.Open(rs.URL(), redisconn.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer client.Close()
	applied := map[string]int{}
	types := map[string]int{}
	c := &outbox.Consumer{Client: client, Group: "test", Name: "c1", Apply: func(_ context.Context, e outbox.Event) error {
		applied[e.ID]++
		types[e.Type]++
		return nil
	}}
	totalApplied, totalSkipped := 0, 0
	for totalApplied+totalSkipped < 2*events {
		a, s, err := c.Poll(ctx, 500*time.Millisecond)
		require.NoError(t, err)
		totalApplied, totalSkipped = totalApplied+a, totalSkipped+s
	}
	require.Equal(t, events, totalApplied)
	require.Equal(t, events, totalSkipped)
	for id, n := range applied {
		require.Equal(t, 1, n, id)
	}
	require.Equal(t, map[string]int{"order.created": 2, "payment.succeeded": 1, "payment.failed": 1}, types)
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
