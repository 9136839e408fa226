// Package rawsql holds the statements of one idempotent order creation as
// the API sends them on PostgreSQL (gormstore's pipeline): the order, its
// outbox event and the idempotency record, queued in one pgx batch that the
// server runs as one implicit transaction. The bench's raw loop (a) and its
// floor program (tools/bench/floorapi) send them through pgx directly, with
// none of the API's layers in between.
package rawsql

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
)

const (
	insertOrder = `INSERT INTO orders (merchant_id, id, customer_id, currency, items, metadata, amount_total, status, version,
    shipping_address, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
	insertEvent = `INSERT INTO outbox_events (merchant_id, id, type, payload, trace_parent, created_at) VALUES ($1, $2, $3, $4, $5, $6)`
	// The record's statement is the store's own plain insert.
	insertRecord = gormstore.FastInsertSQL
)

// Order is the order row and its event's payload, the JSON columns already
// encoded.
type Order struct {
	Merchant, ID, Customer, Currency string
	Items, Metadata                  string
	Total                            int64
	Event                            string // the outbox event's payload
}

// Record is the idempotency record stored beside the order: the answer
// that a replay of Key sends back.
type Record struct {
	Key, Fingerprint string
	Headers          string // the answer's stored headers, as JSON
	Body             []byte
	Sent             []byte // the digest of the request as sent (request_digest)
}

// Queue adds the order, its event and, when rec is not nil, the record to
// batch, all stamped now. The record's RETURNING fence is scanned and
// dropped.
func Queue(batch *pgx.Batch, o Order, rec *Record, now time.Time) {
	batch.Queue(insertOrder, o.Merchant, o.ID, o.Customer, o.Currency, o.Items, o.Metadata,
		o.Total, "pending_payment", 1, nil, now, now)
	batch.Queue(insertEvent, o.Merchant, "evt_"+o.ID, "order.created", o.Event, "", now)
	if rec != nil {
		var fence int64
		batch.Queue(insertRecord, o.Merchant, rec.Key, "POST", "/v1/orders", rec.Fingerprint,
			"completed", "started", idempotency.FirstFence(now), now, 201, rec.Headers, rec.Body, nil, now, now, now.Add(24*time.Hour), rec.Sent).
			QueryRow(func(row pgx.Row) error { return row.Scan(&fence) })
	}
}
