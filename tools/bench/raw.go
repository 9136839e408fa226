package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkeys/payments/tools/bench/rawsql"
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
		id := fmt.Sprintf("%s_%d_%d", run, w, i)
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		order := rawsql.Order{Merchant: "mch_acme", ID: "ord_" + id, Customer: "cus_1", Currency: "BRL",
			Items: items, Metadata: `{"cart": "c_1"}`, Total: 2500,
			Event: `{"id": "ord_` + id + `", "status": "pending_payment", "currency": "BRL", "customer_id": "cus_1", "amount_total": 2500}`}
		var rec *rawsql.Record
		if withRecord {
			rec = &rawsql.Record{Key: "raw-" + id, Fingerprint: fingerprint, Body: responseBody, Sent: rawSent[:],
				Headers: `{"Content-Type":"application/json; charset=utf-8","Location":"/v1/orders/ord_` + id + `"}`}
		}
		batch := &pgx.Batch{}
		rawsql.Queue(batch, order, rec, time.Now().UTC())
		return conn.SendBatch(ctx, batch).Close()
	}
}

// rawSent stands for the digest of the request as sent that the API
// stores with a record: the same 32 bytes in every raw record.
var rawSent = sha256.Sum256([]byte(`{"customer_id":"cus_1"}`))
