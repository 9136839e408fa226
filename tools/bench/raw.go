package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkeys/payments/internal/idempotency/gormstore"
)

// The statements of one idempotent order creation, as the API sends them
// on PostgreSQL (gormstore's pipeline): the order, its outbox event and the
// idempotency record, in one pipeline that the server runs as one implicit
// transaction. The record's statement is the store's own plain insert
// (gormstore.FastInsertSQL).
const (
	rawInsertOrder = `INSERT INTO orders (merchant_id, id, customer_id, currency, items, metadata, amount_total, status, version,
    shipping_address, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
	rawInsertEvent  = `INSERT INTO outbox_events (merchant_id, id, type, payload, trace_parent, created_at) VALUES ($1, $2, $3, $4, $5, $6)`
	rawInsertRecord = gormstore.FastInsertSQL
)

// rawCreate returns an op that runs the SQL of one idempotent order
// creation straight through a pgx connection, with no HTTP, no Gin and no
// GORM in between, sent the way the API sends it on PostgreSQL (gormstore's
// pipeline): the statements in one batch, one round trip, committed by the
// batch's Sync. It is the most the database can give this workload. Without
// withRecord it leaves the idempotency record out, which is what the
// database alone charges for the record.
func rawCreate(pool *pgxpool.Pool, run, fingerprint string, responseBody []byte, withRecord bool) op {
	const items = `[{"sku": "SKU-1", "name": "Coffee", "quantity": 2, "unit_amount": 1250}]`
	return func(ctx context.Context, w, i int) error {
		now := time.Now().UTC()
		id := fmt.Sprintf("%s_%d_%d", run, w, i)
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		batch := &pgx.Batch{}
		batch.Queue(rawInsertOrder, "mch_acme", "ord_"+id, "cus_1", "BRL", items, `{"cart": "c_1"}`,
			2500, "pending_payment", 1, nil, now, now)
		payload := `{"id": "ord_` + id + `", "status": "pending_payment", "currency": "BRL", "customer_id": "cus_1", "amount_total": 2500}`
		batch.Queue(rawInsertEvent, "mch_acme", "evt_"+id, "order.created", payload, "", now)
		var fence int64
		if withRecord {
			headers := `{"Content-Type":"application/json; charset=utf-8","Location":"/v1/orders/ord_` + id + `"}`
			batch.Queue(rawInsertRecord, "mch_acme", "raw-"+id, "POST", "/v1/orders", fingerprint,
				"completed", "started", now, 201, headers, responseBody, nil, now, now, now.Add(24*time.Hour)).
				QueryRow(func(row pgx.Row) error { return row.Scan(&fence) })
		}
		return conn.SendBatch(ctx, batch).Close()
	}
}
