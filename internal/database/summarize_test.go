package database

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestSummarizeNamesTheOperationAndItsTable(t *testing.T) {
	for _, tc := range []struct{ query, op, target string }{
		{`INSERT INTO "idempotency_records" ("merchant_id","key") VALUES ($1,$2)`, "INSERT", "idempotency_records"},
		{"insert into orders(id, amount) values (?, ?)", "INSERT", "orders"},
		{`SELECT * FROM "orders" WHERE id = $1 LIMIT 1`, "SELECT", "orders"},
		{"SELECT count(*) FROM outbox_events WHERE published_at IS NULL", "SELECT", "outbox_events"},
		{"SELECT a, b, c, d, e, f, g, h, i, j FROM payments.payments", "SELECT", "payments.payments"},
		{`UPDATE "payments" SET "status"=$1`, "UPDATE", "payments"},
		{"\n\tDELETE FROM idempotency_records WHERE expires_at < $1", "DELETE", "idempotency_records"},
		{"SELECT 1", "SELECT", ""},
		{"SELECT * FROM (SELECT 1) AS x", "SELECT", ""},
		{"WITH x AS (SELECT 1) SELECT * FROM x", "WITH", ""},
		{"BEGIN", "BEGIN", ""},
		{"commit", "COMMIT", ""},
		{"INSERT", "INSERT", ""},
		{"UPDATE", "UPDATE", ""},
		{"", "", ""},
		{"   ", "", ""},
	} {
		op, target := summarize(tc.query)
		require.Equal(t, tc.op, op, tc.query)
		require.Equal(t, tc.target, target, tc.query)
	}
}

func FuzzSummarize(f *testing.F) {
	f.Add(`INSERT INTO "a" VALUES ($1)`)
	f.Add("SELECT x FROM")
	f.Fuzz(func(t *testing.T, query string) {
		op, target := summarize(query)
		if op == "" && target != "" {
			t.Fatalf("a table without an operation: %q", query)
		}
	})
}

// TestBatchTextIsKeptPerConnection: a batch's text is its statements
// joined by "; "; the same statements again give the kept text (not a
// new string), and other statements, even ones that begin the same, give
// their own.
func TestBatchTextIsKeptPerConnection(t *testing.T) {
	tr := pgxTracing(noop.NewTracerProvider(), "db", 5432)
	batch := func(sql ...string) []*pgx.QueuedQuery {
		q := make([]*pgx.QueuedQuery, len(sql))
		for i, s := range sql {
			q[i] = &pgx.QueuedQuery{SQL: s}
		}
		return q
	}
	first := tr.batchText(batch("INSERT INTO a VALUES ($1)", "INSERT INTO b VALUES ($1)"))
	require.Equal(t, "INSERT INTO a VALUES ($1); INSERT INTO b VALUES ($1)", first)
	again := tr.batchText(batch("INSERT INTO a VALUES ($1)", "INSERT INTO b VALUES ($1)"))
	require.Equal(t, first, again)
	require.Same(t, unsafe.StringData(first), unsafe.StringData(again), "the kept text, not a new one")

	for _, other := range [][]string{
		{"INSERT INTO a VALUES ($1)"},
		{"INSERT INTO a VALUES ($1)", "INSERT INTO b VALUES ($1)", "SELECT 1"},
		{"INSERT INTO a VALUES ($1); INSERT INTO b VALUES ($1)"},
		{"INSERT INTO a VALUES ($1)", "INSERT INTO b VALUES ($2)"},
	} {
		require.Equal(t, strings.Join(other, "; "), tr.batchText(batch(other...)))
	}
	require.Equal(t, "SELECT 1", pgxTracer{}.batchText(batch("SELECT 1")), "a tracer without a kept text builds one")
}
