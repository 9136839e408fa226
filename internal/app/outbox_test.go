package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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

// TestOutboxToJetStream runs the API with OUTBOX_SINK=nats against a private
// nats-server: it creates the stream at start, publishes each event once
// with its id as Nats-Msg-Id, publishes everything again (as after a crash
// between publish and mark) without the stream growing, reports NATS down
// as degraded while events wait in the database, and catches up once NATS is
// back.
func TestOutboxToJetStream(t *testing.T) {
	ns := testkit.StartNATS(t)
	rs := testkit.StartRedis(t)
	w := apptest.Start(t, testkit.DatabaseURL(t, database.Postgres), apptest.WithProvider(provider.Config{DuplicateWebhookRate: -1}),
		apptest.Env("OUTBOX_SINK=nats", "NATS_URL="+ns.URL(), "REDIS_URL="+rs.URL(), "OUTBOX_INTERVAL=50ms"))
	ctx := context.Background()
	js := ns.JetStream(t)
	stream := func() (msgs uint64, ids map[string]int) {
		s, err := js.Stream(ctx, outbox.JetStreamStream)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		ids = map[string]int{}
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			require.NoError(t, err)
			ids[m.Header.Get(jetstream.MsgIDHeader)]++
		}
		return info.State.Msgs, ids
	}

	status, body := readyz(t, w.URL)
	require.Equal(t, 200, status)
	require.Equal(t, map[string]any{"database": "up", "redis": "up", "outbox": "nats", "nats": "up", "provider_breaker": "closed"}, body["checks"])

	order := w.CreateOrder(t, "sk_test_acme")
	require.Equal(t, 201, w.Pay(t, order, apptest.NewKey(), "pm_card_visa").Status)
	const events = 2 // order.created, payment.succeeded
	testkit.Eventually(t, 10*time.Second, "all events published", func() bool {
		return w.Count(t, "SELECT count(*) FROM outbox_events WHERE published_at IS NULL") == 0
	})
	n, ids := stream()
	require.EqualValues(t, events, n)
	require.EqualValues(t, 0, rs.Client(t).Exists(ctx, outbox.StreamKey).Val(), "nothing goes to Redis")

	// Published again, as after a dispatcher crash: the broker drops it.
	db, err := database.Open(w.DatabaseURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Exec("UPDATE outbox_events SET published_at = NULL").Error)
	testkit.Eventually(t, 10*time.Second, "published again", func() bool {
		return w.Count(t, "SELECT count(*) FROM outbox_events WHERE published_at IS NULL") == 0
	})
	n, again := stream()
	require.EqualValues(t, events, n, "each event once in the stream")
	require.Equal(t, ids, again)
	for id, c := range again {
		require.Equal(t, 1, c, id)
		require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM outbox_events WHERE id = ?", id))
	}

	// NATS down: degraded, not 503; the API keeps working and its events wait.
	ns.Kill()
	testkit.Eventually(t, 10*time.Second, "readyz reports nats down", func() bool {
		status, body := readyz(t, w.URL)
		return status == 200 && body["status"] == "degraded" && body["checks"].(map[string]any)["nats"] == "down"
	})
	w.CreateOrder(t, "sk_test_acme")
	require.EqualValues(t, events+1, w.Count(t, "SELECT count(*) FROM outbox_events"))

	require.NoError(t, ns.Restart(30*time.Second))
	testkit.Eventually(t, 30*time.Second, "caught up after NATS came back", func() bool {
		return w.Count(t, "SELECT count(*) FROM outbox_events WHERE published_at IS NULL") == 0
	})
	n, _ = stream()
	require.EqualValues(t, events+1, n)
	testkit.Eventually(t, 10*time.Second, "readyz ok again", func() bool {
		status, body := readyz(t, w.URL)
		return status == 200 && body["status"] == "ok"
	})
}
