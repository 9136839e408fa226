// Package outbox publishes the events that the payments service writes to
// the outbox_events table in its business transactions.
//
// The table is the source of truth: an event exists if and only if its change
// committed. The Dispatcher moves unpublished events to a Publisher (a Redis
// stream, a NATS JetStream stream, or the log when Redis is off) and then
// marks them published. A
// crash between the two publishes the event again on the next round, so
// delivery is at least once, never at most once, and every event carries its
// id: consumers deduplicate on it (examples/outbox-consumer records the ids
// it applied in the transaction of the effect).
//
// The Redis stream keeps every entry that some consumer group has not
// acknowledged: RedisStreamPublisher.Trim, which the Dispatcher runs every
// TrimInterval, cuts below the oldest entry any group still needs.
// JetStream deduplicates by itself: each message carries the event id as
// Nats-Msg-Id, and the stream drops a repeat within its duplicate window
// (nats.go has the names and the window).
package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
)

// Event is one outbox row as published.
type Event struct {
	ID         string `gorm:"column:id"`
	MerchantID string `gorm:"column:merchant_id"`
	Type       string `gorm:"column:type"`
	Payload    string `gorm:"column:payload"`
	// TraceParent is the W3C trace context of the transaction that wrote
	// the event, "" when it was not traced. Publishers send it on beside
	// the event (the stream entry's traceparent field, the message's
	// traceparent header), so a consumer's span continues that trace.
	TraceParent string `gorm:"column:trace_parent"`
}

// TableName tells GORM the table, which the migrations own.
func (Event) TableName() string { return "outbox_events" }

// Publisher sends events onward. Publish must be all or nothing per call as
// far as the caller can tell: on an error the whole batch is sent again.
type Publisher interface {
	Publish(ctx context.Context, events []Event) error
}

// Trimmer is a Publisher whose sink the Dispatcher must trim now and then
// (RedisStreamPublisher); a broker that ages messages out by itself has no
// Trim.
type Trimmer interface {
	// Trim drops what no consumer needs any more and returns how many
	// entries it dropped; an error leaves the sink as it was.
	Trim(ctx context.Context) (int64, error)
}

// DefaultTrimInterval is how often the Dispatcher trims a Trimmer.
const DefaultTrimInterval = time.Minute

// Dispatcher moves unpublished events to a Publisher.
type Dispatcher struct {
	db       *gorm.DB
	pub      Publisher
	interval time.Duration
	batch    int
	claim    string // claimSQL for db's dialect
	log      *slog.Logger
	// TrimInterval is how often Run trims the publisher, if it is a
	// Trimmer; NewDispatcher sets DefaultTrimInterval.
	TrimInterval time.Duration
}

// NewDispatcher returns a Dispatcher polling db every interval.
func NewDispatcher(db *gorm.DB, pub Publisher, interval time.Duration, log *slog.Logger) *Dispatcher {
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	if log == nil {
		log = slog.Default()
	}
	const batch = 100
	return &Dispatcher{db: db, pub: pub, interval: interval, batch: batch, claim: claimSQL(db, batch), log: log,
		TrimInterval: DefaultTrimInterval}
}

// Run dispatches until ctx ends. A batch it is publishing then still
// commits (finish): it stops between batches, never inside one.
func (d *Dispatcher) Run(ctx context.Context) {
	t := time.NewTicker(d.interval)
	defer t.Stop()
	trimmer, _ := d.pub.(Trimmer)
	nextTrim := time.Now().Add(d.TrimInterval)
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if trimmer != nil && time.Now().After(nextTrim) {
			nextTrim = time.Now().Add(d.TrimInterval)
			if n, err := trimmer.Trim(ctx); err != nil && ctx.Err() == nil {
				d.log.WarnContext(ctx, "outbox: trimming the stream failed; it keeps its entries until the next try", "error", err)
			} else if n > 0 {
				d.log.DebugContext(ctx, "outbox: trimmed the stream", "entries", n)
			}
		}
		for ctx.Err() == nil {
			n, err := d.finish(ctx)
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

// finish is DispatchOnce for Run: a batch begun before ctx ends (the
// process stopping) is not cut short by it, but committed, or rolled back
// for a reason of its own, within finishLimit. Cut short, its claim would
// roll back after the publisher had sent the batch, and the next round
// would send it again.
func (d *Dispatcher) finish(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishLimit)
	defer cancel()
	return d.DispatchOnce(ctx)
}

// finishLimit bounds a batch that Run lets finish after its context ends:
// the claim, and the publisher's wait for its acknowledgement (5 s on
// NATS).
const finishLimit = 10 * time.Second

// claimSQL marks the oldest unpublished events published, at most batch
// of them, and returns them, in one statement whose text never changes (so
// PostgreSQL parses it once per connection; the earlier select, then update
// of a list of keys, took two round trips and a statement that grew with
// the batch). The batch is chosen on the index of unpublished events and
// its rows are then updated by address (database.Oldest): on PostgreSQL,
// concurrent dispatchers (one per API instance) skip each other's locked
// rows instead of waiting, and a plan that scanned the whole table for
// each batch cannot be chosen, whatever the table's statistics say.
func claimSQL(db *gorm.DB, batch int) string {
	return `UPDATE outbox_events SET published_at = ?
WHERE ` + dbtx.Oldest(db, "outbox_events", "published_at IS NULL", "created_at", batch) + `
RETURNING merchant_id, id, type, payload, trace_parent, created_at`
}

// DispatchOnce publishes one batch of the oldest unpublished events and
// returns how many it published. The batch is claimed (marked published)
// and published in one transaction: when the publisher fails, or the
// process dies before the commit, the rows stay unpublished and the next
// round sends them again.
func (d *Dispatcher) DispatchOnce(ctx context.Context) (int, error) {
	var n int
	err := database.Transaction(ctx, d.db, func(ctx context.Context) error {
		rows, err := dbtx.Conn(ctx, d.db).Raw(d.claim, time.Now().UTC()).Rows()
		if err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		var claimed []claimedEvent
		for rows.Next() {
			var c claimedEvent
			if err := rows.Scan(&c.MerchantID, &c.ID, &c.Type, &c.Payload, &c.TraceParent, &c.CreatedAt); err != nil {
				return err
			}
			claimed = append(claimed, c)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(claimed) == 0 {
			return nil
		}
		// RETURNING comes in no promised order; publishers keep the
		// order they are given, oldest first. The events are put in
		// order by their indices, which move cheaply.
		order := make([]int, len(claimed))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(i, j int) int { return claimed[i].CreatedAt.Compare(claimed[j].CreatedAt) })
		events := make([]Event, len(claimed))
		for i, at := range order {
			events[i] = claimed[at].Event
		}
		if err := d.pub.Publish(ctx, events); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		n = len(events)
		return nil
	})
	return n, database.Classify(err)
}

// claimedEvent is an event as the claim returns it: with the time it was
// written, which orders the batch.
type claimedEvent struct {
	Event
	CreatedAt time.Time
}

// LogPublisher writes events to the log: the outbox's sink when Redis is
// off, so events are still drained and visible.
type LogPublisher struct {
	Log *slog.Logger
}

// Publish implements Publisher.
func (p LogPublisher) Publish(ctx context.Context, events []Event) error {
	for _, e := range events {
		p.Log.LogAttrs(ctx, slog.LevelInfo, "outbox event",
			slog.String("event_id", e.ID), slog.String("type", e.Type), slog.String("merchant_id", e.MerchantID))
	}
	return nil
}
