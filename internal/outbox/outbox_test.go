package outbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency/gormstore/gormtest"
	"github.com/idemkeys/payments/internal/testkit"
)

// recorder is a Publisher that keeps what it was given, batch by batch.
type recorder struct{ batches [][]Event }

func (r *recorder) Publish(_ context.Context, events []Event) error {
	r.batches = append(r.batches, append([]Event(nil), events...))
	return nil
}

// TestDispatcherPublishesOldestFirst: 250 events whose ids and rows run
// against the order they were written in go out in batches of 100, 100 and 50,
// each event once, oldest first across the batches, and end up marked
// published; a fourth round finds nothing.
func TestDispatcherPublishesOldestFirst(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			db := testkit.OpenDB(t, dialect)
			events := make([]Event, 250)
			for i := range events {
				// The last written has the smallest id, and the merchants
				// interleave, so neither key orders them.
				events[i] = Event{ID: fmt.Sprintf("evt_%03d", len(events)-i), MerchantID: fmt.Sprintf("mer_%d", i%3),
					Type: "order.created", Payload: fmt.Sprintf(`{"n": %d}`, i), TraceParent: fmt.Sprintf("tp-%d", i)}
			}
			// Written last first: the table's physical order runs against
			// created_at too.
			now := time.Now().UTC()
			for i := len(events) - 1; i >= 0; i-- {
				e := events[i]
				require.NoError(t, db.Exec("INSERT INTO outbox_events (merchant_id, id, type, payload, trace_parent, created_at) VALUES (?, ?, ?, ?, ?, ?)",
					e.MerchantID, e.ID, e.Type, e.Payload, e.TraceParent, now.Add(time.Duration(i)*time.Millisecond)).Error)
			}

			rec := &recorder{}
			d := NewDispatcher(db.DB, rec, time.Second, nil)
			for _, want := range []int{100, 100, 50, 0} {
				n, err := d.DispatchOnce(ctx)
				require.NoError(t, err)
				require.Equal(t, want, n)
			}
			require.Len(t, rec.batches, 3)
			var got []Event
			for i, b := range rec.batches {
				require.Len(t, b, []int{100, 100, 50}[i])
				got = append(got, b...)
			}
			require.Equal(t, events, got, "every event once, with its columns, oldest first")
			require.Zero(t, unpublished(t, db))
		})
	}
}

// numberedEvents are n events of one merchant, evt_000 first, for
// insertEvents to write a millisecond apart in that order.
func numberedEvents(n int) []Event {
	events := make([]Event, n)
	for i := range events {
		events[i] = Event{ID: fmt.Sprintf("evt_%03d", i), MerchantID: "mer_1", Type: "order.created", Payload: "{}"}
	}
	return events
}

// held is a Publisher that holds the first batch it is given (and with it
// the claiming transaction's row locks) until it is released.
type held struct {
	got     chan []Event
	release chan struct{}
}

func (h *held) Publish(_ context.Context, events []Event) error {
	h.got <- events
	<-h.release
	return nil
}

// TestDispatchersClaimDifferentBatches: on PostgreSQL, one dispatcher per
// API instance. While one holds its claimed batch (publishing it, its
// transaction open), another claims the next batch without waiting for
// it, and no event is in both.
func TestDispatchersClaimDifferentBatches(t *testing.T) {
	ctx := context.Background()
	db := testkit.OpenDB(t, database.Postgres)
	insertEvents(t, db, numberedEvents(200))

	first := &held{got: make(chan []Event, 1), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := NewDispatcher(db.DB, first, time.Second, nil).DispatchOnce(ctx)
		done <- err
	}()
	var holding []Event
	select {
	case holding = <-first.got:
	case err := <-done:
		t.Fatalf("the first dispatcher ended before publishing: %v", err)
	}

	rec := &recorder{}
	waitless, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	n, err := NewDispatcher(db.DB, rec, time.Second, nil).DispatchOnce(waitless)
	require.NoError(t, err, "the second dispatcher does not wait for the first one's rows")
	require.Equal(t, 100, n)
	close(first.release)
	require.NoError(t, <-done)

	seen := map[string]bool{}
	for _, e := range append(holding, rec.batches[0]...) {
		require.False(t, seen[e.ID], "%s claimed twice", e.ID)
		seen[e.ID] = true
	}
	require.Len(t, seen, 200)
	require.Equal(t, "evt_000", holding[0].ID, "the first claim took the oldest")
	require.Equal(t, "evt_100", rec.batches[0][0].ID, "the second took the next oldest")
	require.Zero(t, unpublished(t, db))
}

// TestStoppingRunCommitsTheBatchInFlight: a dispatcher stopped while it
// publishes a batch (an API instance shutting down) commits that batch's
// claim, so the next round does not send it again, and claims no other.
// The claim used to run under Run's context, and the stop rolled it back:
// the batch went out twice, and every such stop left a rolled-back
// transaction in the database's statistics.
func TestStoppingRunCommitsTheBatchInFlight(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			db := testkit.OpenDB(t, dialect)
			insertEvents(t, db, numberedEvents(150))
			pub := &held{got: make(chan []Event, 1), release: make(chan struct{})}
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				NewDispatcher(db.DB, pub, 10*time.Millisecond, nil).Run(ctx)
				close(done)
			}()
			var sent []Event
			select {
			case sent = <-pub.got:
			case <-time.After(15 * time.Second):
				t.Fatal("the dispatcher published nothing")
			}
			stop()
			close(pub.release)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("Run did not return after its context ended")
			}
			require.Len(t, sent, 100)
			require.EqualValues(t, 50, unpublished(t, db), "the batch in flight committed; the next one was not claimed")
			require.Empty(t, pub.got, "no second batch was published")
		})
	}
}

// TestClaimPlanIsTheBatchAlone: the claim's plan on PostgreSQL chooses the
// batch once on the index of unpublished events and updates those rows by
// address, with its arguments and without, whatever the statistics say.
// The claim that matched the batch by key, its limit a parameter, got a
// generic plan that read the whole table for every batch once the
// statistics had seen a backlog (a hash semi join over a sequential scan).
func TestClaimPlanIsTheBatchAlone(t *testing.T) {
	db := testkit.OpenDB(t, database.Postgres)
	require.NoError(t, db.Exec(`ALTER TABLE outbox_events SET (autovacuum_enabled = off)`).Error)
	require.NoError(t, db.Exec(`
INSERT INTO outbox_events (merchant_id, id, type, payload, trace_parent, created_at, published_at)
SELECT 'mer_' || (i % 4), 'evt_' || i, 'order.created', '{}', '', now(), CASE WHEN i % 3 = 0 THEN NULL ELSE now() END
FROM generate_series(1, 30000) AS i`).Error)
	require.NoError(t, db.Exec(`ANALYZE outbox_events`).Error)
	for _, plan := range gormtest.Explain(t, db.DB, NewDispatcher(db.DB, nil, time.Second, nil).claim, time.Now().UTC()) {
		require.Equal(t, "Tid Scan", plan.Children["Outer"], "%s: the claim reads only the batch's rows: %s", plan.Mode, plan.JSON)
		require.Equal(t, "Limit", plan.Children["InitPlan"], "%s: the batch is chosen once: %s", plan.Mode, plan.JSON)
	}
}
