package app_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestRetryOnAnotherInstanceReadsBeforeItWorks: orders created on instance
// a, each retried once on instance b, which has never seen the keys (no
// Redis, its memory empty), and sent again with another body. The retries
// replay, byte for byte, and the other bodies get 422, without b running
// a handler: no statement of one, so no transaction rolled back in the
// whole database, where each retry used to run the handler, fail the
// record's insert (a unique violation that put the key in PostgreSQL's
// log), roll back, and try again (1.87 rolled-back transactions per retry).
func TestRetryOnAnotherInstanceReadsBeforeItWorks(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	// A database of its own: pg_stat_database counts its transactions alone.
	dbURL, name := testkit.NewPostgresDatabase(t)
	// The instances run with their default settings, workers included, and
	// every transaction of their whole lives is counted, the stop's too: a
	// dispatcher stopped in the middle of a batch used to roll it back (in
	// about one run in four under CI's load), until it learned to finish it
	// (outbox's TestStoppingRunCommitsTheBatchInFlight).
	a := apptest.StartBinary(t, bin, dbURL)
	b := apptest.StartBinary(t, bin, dbURL)

	const n = 40
	keys, bodies := make([]string, n), make([]string, n)
	for i := range n {
		keys[i] = apptest.NewKey()
		created := apptest.Call(t, "POST", a.URL+"/v1/orders", "sk_test_acme", keys[i], apptest.OrderBody)
		require.Equal(t, http.StatusCreated, created.Status, string(created.Body))
		bodies[i] = string(created.Body)
	}
	other := `{"customer_id":"cus_2","currency":"BRL","items":[{"sku":"SKU-9","name":"Tea","quantity":1,"unit_amount":900}],"metadata":{}}`
	for i := range n {
		again := apptest.Call(t, "POST", b.URL+"/v1/orders", "sk_test_acme", keys[i], apptest.OrderBody)
		require.Equal(t, http.StatusCreated, again.Status)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		require.Equal(t, bodies[i], string(again.Body))
		reused := apptest.Call(t, "POST", b.URL+"/v1/orders", "sk_test_acme", keys[i], other)
		require.Equal(t, http.StatusUnprocessableEntity, reused.Status, string(reused.Body))
	}
	require.EqualValues(t, n, a.Count(t, "SELECT count(*) FROM orders"), "no order of the other bodies")

	// A backend reports its counts when it ends: stop both instances, then
	// read the database's totals.
	a.Process.Stop(10 * time.Second)
	b.Process.Stop(10 * time.Second)
	var rollbacks int64
	testkit.Eventually(t, 10*time.Second, "the instances' sessions ended", func() bool {
		return testkit.Count(t, dbURL, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()") == 0
	})
	rollbacks = testkit.Count(t, dbURL, "SELECT xact_rollback FROM pg_stat_database WHERE datname = '"+name+"'")
	require.Zero(t, rollbacks, "transactions rolled back in the database")
}
