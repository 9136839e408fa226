package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/outbox"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestRedisConsumerKilledAppliesEachEventOnce runs the consumer binary over
// a stream that holds every event twice (as after a dispatcher crash between
// publish and mark), kills it between a commit and its ack, then between
// reading and applying, and restarts it under another name, which must take
// the dead runs' pending entries over with XAUTOCLAIM. The consumer's
// database then holds exactly one effect per event.
func TestRedisConsumerKilledAppliesEachEventOnce(t *testing.T) {
	testkit.EndToEnd(t) // builds and runs the consumer binary
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			dbURL, db := consumerDB(t, dialect)
			rs := testkit.StartRedis(t)
			client := rs.Client(t)
			pub := outbox.RedisStreamPublisher{Client: client}
			events, want := testEvents(12)
			require.NoError(t, pub.Publish(ctx, events))
			require.NoError(t, pub.Publish(ctx, events))
			entries, err := client.XRange(ctx, redisStream, "-", "+").Result()
			require.NoError(t, err)
			require.Len(t, entries, 24)

			env := []string{"OUTBOX_SINK=redis", "REDIS_URL=" + rs.URL(), "CONSUMER_DATABASE_URL=" + dbURL,
				"CONSUMER_GROUP=example", "CONSUMER_CLAIM_AFTER=300ms", "CONSUMER_BATCH=5"}
			pending := func() *redis.XPending {
				p, err := client.XPending(ctx, redisStream, "example").Result()
				require.NoError(t, err)
				return p
			}

			// 1. Killed after the third commit, before its ack: the
			// effect is in the database and the entry still pending.
			run := startConsumer(t, append(env, "CONSUMER_NAME=first", "CONSUMER_CRASH_AT=after-commit", "CONSUMER_CRASH_AFTER=3")...)
			run.requireKilledItself(t, "after-commit")
			require.Equal(t, 3, count(t, db, "SELECT count(*) FROM processed_events"))
			require.Equal(t, 1, count(t, db, "SELECT count(*) FROM processed_events WHERE event_id = $1", events[2].ID))
			p := pending()
			require.EqualValues(t, 3, p.Count, "entries 3 to 5 of the batch of 5 were read and not acknowledged")
			require.Equal(t, entries[2].ID, p.Lower, "the committed one among them")

			// 2. Killed after reading its second entry, before applying
			// it: nothing more is applied than the first one it handled.
			run = startConsumer(t, append(env, "CONSUMER_NAME=second", "CONSUMER_CRASH_AT=before-apply", "CONSUMER_CRASH_AFTER=2")...)
			run.requireKilledItself(t, "before-apply")
			require.LessOrEqual(t, count(t, db, "SELECT count(*) FROM processed_events"), 4)
			require.Positive(t, pending().Count)
			secondRun := run.out.String() // it may already have taken over the committed entry

			// 3. A clean run under a third name takes over what the dead
			// ones left and reads the rest.
			run = startConsumer(t, append(env, "CONSUMER_NAME=third")...)
			testkit.Eventually(t, time.Minute, "every entry read and acknowledged", func() bool {
				groups, err := client.XInfoGroups(ctx, redisStream).Result()
				require.NoError(t, err)
				return len(groups) == 1 && groups[0].Pending == 0 && groups[0].LastDeliveredID == entries[len(entries)-1].ID
			})
			run.stop(t)
			require.Contains(t, secondRun+run.out.String(), "took over entries left unacknowledged")
			require.Contains(t, secondRun+run.out.String(), "duplicate: applied before")

			requireExactlyOnce(t, db, events, want)
		})
	}
}
