// Package outbox publishes the events that the payments service writes to
// the outbox_events table in its business transactions.
//
// The table is the source of truth: an event exists if and only if its change
// committed. The Dispatcher moves unpublished events to a Publisher (a Redis
// stream, or the log when Redis is off) and then marks them published. A
// crash between the two publishes the event again on the next round, so
// delivery is at least once, never at most once, and every event carries its
// id: consumers deduplicate on it (see Consumer).
package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/idemkeys/payments/internal/database"
)

// Event is one outbox row as published.
type Event struct {
	ID         string `gorm:"column:id"`
	MerchantID string `gorm:"column:merchant_id"`
	Type       string `gorm:"column:type"`
	Payload    string `gorm:"column:payload"`
}

// TableName tells GORM the table, which the migrations own.
func (Event) TableName() string { return "outbox_events" }

// Publisher sends events onward. Publish must be all or nothing per call as
// far as the caller can tell: on an error the whole batch is sent again.
type Publisher interface {
	Publish(ctx context.Context, events []Event) error
}

// Dispatcher moves unpublished events to a Publisher.
type Dispatcher struct {
	db       *gorm.DB
	pub      Publisher
	interval time.Duration
	batch    int
	log      *slog.Logger
}

// NewDispatcher returns a Dispatcher polling db every interval.
func NewDispatcher(db *gorm.DB, pub Publisher, interval time.Duration, log *slog.Logger) *Dispatcher {
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	if log == nil {
		log = slog.Default()
	}
	return &Dispatcher{db: db, pub: pub, interval: interval, batch: 100, log: log}
}

// Run dispatches until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) {
	t := time.NewTicker(d.interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			n, err := d.DispatchOnce(ctx)
			if err != nil {
				if !failing && ctx.Err() == nil {
					d.log.WarnContext(ctx, "outbox: publishing failed; events stay queued and will be sent again", "error", err)
				}
				failing = true
				break
			}
			if failing {
				d.log.InfoContext(ctx, "outbox: publishing again")
				failing = false
			}
			if n < d.batch {
				break
			}
		}
	}
}

// DispatchOnce publishes one batch of the oldest unpublished events and
// returns how many it published. On PostgreSQL, concurrent dispatchers (one
// per API instance) skip each other's locked rows instead of waiting.
func (d *Dispatcher) DispatchOnce(ctx context.Context) (int, error) {
	var n int
	err := database.Transaction(ctx, d.db, func(ctx context.Context) error {
		q := database.Conn(ctx, d.db).Where("published_at IS NULL").Order("created_at").Limit(d.batch)
		if d.db.Name() == "postgres" {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		var events []Event
		if err := q.Find(&events).Error; err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		if err := d.pub.Publish(ctx, events); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		// By the whole primary key: an event id alone is unique too, but
		// no index leads with it, and matching on it alone scanned the
		// whole table on every batch (a second each at a million events,
		// seen under cmd/bench).
		keys := make([][]any, len(events))
		for i, e := range events {
			keys[i] = []any{e.MerchantID, e.ID}
		}
		n = len(events)
		return database.Conn(ctx, d.db).Exec(
			"UPDATE outbox_events SET published_at = ? WHERE (merchant_id, id) IN ?", time.Now().UTC(), keys).Error
	})
	return n, database.Classify(err)
}

// StreamKey is the Redis stream the events go to.
const StreamKey = "outbox:events"

// RedisStreamPublisher appends events to a Redis stream, one entry each,
// with the event id as a field for consumers to deduplicate on.
type RedisStreamPublisher struct {
	Client redis.UniversalClient
}

// Publish implements Publisher.
func (p RedisStreamPublisher) Publish(ctx context.Context, events []Event) error {
	pipe := p.Client.Pipeline()
	for _, e := range events {
		pipe.XAdd(ctx, &redis.XAddArgs{
			Stream: StreamKey,
			MaxLen: 1_000_000,
			Approx: true,
			Values: map[string]any{"event_id": e.ID, "type": e.Type, "merchant_id": e.MerchantID, "payload": e.Payload},
		})
	}
	_, err := pipe.Exec(ctx)
	return err
}

// LogPublisher writes events to the log: the outbox's sink when Redis is
// off, so events are still drained and visible.
type LogPublisher struct {
	Log *slog.Logger
}

// Publish implements Publisher.
func (p LogPublisher) Publish(ctx context.Context, events []Event) error {
	for _, e := range events {
		p.Log.InfoContext(ctx, "outbox event", "event_id", e.ID, "type", e.Type, "merchant_id", e.MerchantID)
	}
	return nil
}
