package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The statements of one idempotent order creation, as the API sends them
// (read off PostgreSQL's statement log with log_statement = 'all'): BEGIN,
// the order, its outbox event, the idempotency record, COMMIT. The record's
// statement is the store's insert-if-absent, conflict clause and all.
const (
	rawInsertOrder = `INSERT INTO "orders" ("merchant_id","id","customer_id","currency","items","metadata","amount_total","status","version","shipping_address","created_at","updated_at") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)`
	rawInsertEvent = `
INSERT INTO outbox_events (merchant_id, id, type, payload, created_at) VALUES ($1, $2, $3, $4, $5)`
	rawInsertRecord = `
INSERT INTO idempotency_records AS r (
    merchant_id, idempotency_key, method, path, fingerprint, state, recovery_point,
    fence, locked_until, response_status, response_headers, response_body, response_key_id,
    created_at, updated_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10, $11, $12, $13, $14, $15)
ON CONFLICT (merchant_id, idempotency_key) DO UPDATE SET
    method = excluded.method, path = excluded.path, fingerprint = excluded.fingerprint,
    state = excluded.state, recovery_point = excluded.recovery_point,
    fence = r.fence + 1, locked_until = excluded.locked_until,
    response_status = excluded.response_status, response_headers = excluded.response_headers,
    response_body = excluded.response_body, response_key_id = excluded.response_key_id,
    created_at = excluded.created_at,
    updated_at = excluded.updated_at, expires_at = excluded.expires_at
WHERE r.expires_at <= excluded.created_at
RETURNING fence`
)

// rawCreate returns an op that runs the SQL of one idempotent order
// creation straight through a pgx pool, with no HTTP, no Gin and no GORM in
// between: the most the database can give this workload. Without withRecord
// it leaves the idempotency record out, which is what the database alone
// charges for the record.
func rawCreate(pool *pgxpool.Pool, run, fingerprint string, responseBody []byte, withRecord bool) op {
	const items = `[{"sku": "SKU-1", "name": "Coffee", "quantity": 2, "unit_amount": 1250}]`
	return func(ctx context.Context, w, i int) error {
		now := time.Now().UTC()
		id := fmt.Sprintf("%s_%d_%d", run, w, i)
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if _, err := tx.Exec(ctx, rawInsertOrder, "mch_acme", "ord_"+id, "cus_1", "BRL", items, `{"cart": "c_1"}`,
			2500, "pending_payment", 1, nil, now, now); err != nil {
			return err
		}
		payload := `{"id": "ord_` + id + `", "status": "pending_payment", "currency": "BRL", "customer_id": "cus_1", "amount_total": 2500}`
		if _, err := tx.Exec(ctx, rawInsertEvent, "mch_acme", "evt_"+id, "order.created", payload, now); err != nil {
			return err
		}
		if !withRecord {
			return tx.Commit(ctx)
		}
		var fence int64
		headers := `{"Content-Type":"application/json; charset=utf-8","Location":"/v1/orders/ord_` + id + `"}`
		if err := tx.QueryRow(ctx, rawInsertRecord, "mch_acme", "raw-"+id, "POST", "/v1/orders", fingerprint,
			"completed", "started", now, 201, headers, responseBody, nil, now, now, now.Add(24*time.Hour)).Scan(&fence); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
}
