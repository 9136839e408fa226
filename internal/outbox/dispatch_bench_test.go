package outbox

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/testkit"
)

// BenchmarkDispatch is what the dispatcher spends on one full batch of
// events (its size, 100), published to the log as the API does without
// Redis: one iteration claims the batch, writes its lines and marks it
// published. The events are inserted with the timer stopped.
func BenchmarkDispatch(b *testing.B) {
	for _, dialect := range testkit.Dialects {
		b.Run(string(dialect), func(b *testing.B) {
			ctx := context.Background()
			db := testkit.OpenDB(b, dialect)
			d := NewDispatcher(db.DB, LogPublisher{Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}, time.Second, nil)
			// An event as the business transactions write it.
			type row struct {
				Event
				CreatedAt time.Time `gorm:"column:created_at"`
			}
			batch := make([]row, d.batch)
			b.ReportAllocs()
			round := 0
			for b.Loop() {
				b.StopTimer()
				round++
				for i := range batch {
					batch[i] = row{Event{ID: fmt.Sprintf("evt_%d_%d", round, i), MerchantID: "mch_acme", Type: "order.created",
						Payload: `{"id": "ord_1", "status": "pending_payment", "currency": "BRL", "customer_id": "cus_1", "amount_total": 2500}`},
						time.Now().UTC()}
				}
				if err := db.WithContext(ctx).Create(&batch).Error; err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				n, err := d.DispatchOnce(ctx)
				if err != nil || n != len(batch) {
					b.Fatalf("dispatched %d of %d: %v", n, len(batch), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/event")
		})
	}
}
