package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/outbox"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestJetStreamConsumerKilledMidBatchAppliesEachEventOnce runs the consumer
// binary over the OUTBOX stream of a private nats-server, kills it in the
// middle of a fetched batch between a commit and its ack, then between
// reading and applying, and restarts it: the durable consumer redelivers
// what was not acknowledged after AckWait, and the consumer's database holds
// exactly one effect per event.
func TestJetStreamConsumerKilledMidBatchAppliesEachEventOnce(t *testing.T) {
	testkit.EndToEnd(t) // builds and runs the consumer binary
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			dbURL, db := consumerDB(t, dialect)
			ns := testkit.StartNATS(t)
			pub, err := outbox.NewJetStreamPublisher(ns.Conn(t))
			require.NoError(t, err)
			events, want := testEvents(12)
			require.NoError(t, pub.Publish(ctx, events))
			require.NoError(t, pub.Publish(ctx, events), "the broker drops the copies")

			js := ns.JetStream(t)
			info := func() *jetstream.ConsumerInfo {
				c, err := js.Consumer(ctx, natsStream, "example")
				require.NoError(t, err)
				i, err := c.Info(ctx)
				require.NoError(t, err)
				return i
			}
			env := []string{"OUTBOX_SINK=nats", "NATS_URL=" + ns.URL(), "CONSUMER_DATABASE_URL=" + dbURL,
				"CONSUMER_GROUP=example", "CONSUMER_CLAIM_AFTER=300ms", "CONSUMER_BATCH=5"}

			// 1. Killed after the third commit of a batch of five, before
			// its ack.
			run := startConsumer(t, append(env, "CONSUMER_CRASH_AT=after-commit", "CONSUMER_CRASH_AFTER=3")...)
			run.requireKilledItself(t, "after-commit")
			require.Equal(t, 3, count(t, db, "SELECT count(*) FROM processed_events"))
			require.Equal(t, 1, count(t, db, "SELECT count(*) FROM processed_events WHERE event_id = $1", events[2].ID))
			i := info()
			require.Equal(t, 3, i.NumAckPending, "three of the batch fetched and not acknowledged")
			require.EqualValues(t, 2, i.AckFloor.Stream, "the first two acknowledged")

			// 2. Killed after reading its second message, before applying it.
			// The redelivered third message may be one of the two.
			run = startConsumer(t, append(env, "CONSUMER_CRASH_AT=before-apply", "CONSUMER_CRASH_AFTER=2")...)
			run.requireKilledItself(t, "before-apply")
			secondRun := run.out.String()
			require.LessOrEqual(t, count(t, db, "SELECT count(*) FROM processed_events"), 4)

			// 3. A clean run.
			run = startConsumer(t, env...)
			testkit.Eventually(t, time.Minute, "every message delivered and acknowledged", func() bool {
				i := info()
				return i.NumPending == 0 && i.NumAckPending == 0 && i.AckFloor.Stream == uint64(len(events))
			})
			run.stop(t)
			require.Contains(t, secondRun+run.out.String(), "duplicate: applied before",
				"the committed, unacknowledged message came back (to the second run or the third)")

			requireExactlyOnce(t, db, events, want)
		})
	}
}

// TestJetStreamConsumerWaitsForTheStream: started before the API has made
// the stream, the consumer waits for it and then reads from the start.
func TestJetStreamConsumerWaitsForTheStream(t *testing.T) {
	testkit.EndToEnd(t) // builds and runs the consumer binary
	ctx := context.Background()
	dbURL, db := consumerDB(t, "sqlite")
	ns := testkit.StartNATS(t)
	run := startConsumer(t, "OUTBOX_SINK=nats", "NATS_URL="+ns.URL(), "CONSUMER_DATABASE_URL="+dbURL)
	testkit.Eventually(t, time.Minute, "the consumer says it waits", func() bool {
		return strings.Contains(run.out.String(), "waiting for the API to create the stream")
	})
	pub, err := outbox.NewJetStreamPublisher(ns.Conn(t))
	require.NoError(t, err)
	events, want := testEvents(4)
	require.NoError(t, pub.Publish(ctx, events))
	testkit.Eventually(t, time.Minute, "all applied", func() bool {
		return count(t, db, "SELECT count(*) FROM processed_events") == len(events)
	})
	run.stop(t)
	requireExactlyOnce(t, db, events, want)
}
