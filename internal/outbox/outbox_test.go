package outbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
