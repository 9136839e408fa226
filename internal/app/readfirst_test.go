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

// TestARetryOfTheSameBytesElsewhereTakesTheRecordsFingerprint: a record
// keeps the digest of the bytes its request sent (request_digest), so a
// retry of those very bytes on an instance that never saw the key replays
// with the record's fingerprint, without canonicalizing the body again.
// A fingerprint changed in the database shows it: the retry still
// replays, where a body canonicalized again would not match. The same
// JSON in other bytes is canonicalized, and refused against the changed
// fingerprint; and a record stored without a digest (before the column
// existed) is canonicalized as before, and replays.
func TestARetryOfTheSameBytesElsewhereTakesTheRecordsFingerprint(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			dbURL := testkit.DatabaseURL(t, dialect)
			a, b := apptest.Start(t, dbURL), apptest.Start(t, dbURL)
			create := func() (string, apptest.Answer) {
				key := apptest.NewKey()
				created := apptest.Call(t, "POST", a.URL+"/v1/orders", "sk_test_acme", key, apptest.OrderBody)
				require.Equal(t, http.StatusCreated, created.Status, string(created.Body))
				return key, created
			}
			key, created := create()
			require.EqualValues(t, 1, a.Count(t, "SELECT count(*) FROM idempotency_records WHERE idempotency_key = ? AND request_digest IS NOT NULL", key))
			require.NotZero(t, a.Count(t, "UPDATE idempotency_records SET fingerprint = 'changed' WHERE idempotency_key = ? RETURNING fence", key))

			again := apptest.Call(t, "POST", b.URL+"/v1/orders", "sk_test_acme", key, apptest.OrderBody)
			require.Equal(t, http.StatusCreated, again.Status, "the very bytes: the record's fingerprint, not the body's: %s", again.Body)
			require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
			require.Equal(t, string(created.Body), string(again.Body))
			spaced := apptest.Call(t, "POST", b.URL+"/v1/orders", "sk_test_acme", key, " "+apptest.OrderBody+"\n")
			require.Equal(t, http.StatusUnprocessableEntity, spaced.Status, "other bytes are canonicalized: %s", spaced.Body)

			old, oldCreated := create()
			require.NotZero(t, a.Count(t, "UPDATE idempotency_records SET request_digest = NULL WHERE idempotency_key = ? RETURNING fence", old))
			replayed := apptest.Call(t, "POST", b.URL+"/v1/orders", "sk_test_acme", old, apptest.OrderBody)
			require.Equal(t, http.StatusCreated, replayed.Status, string(replayed.Body))
			require.Equal(t, string(oldCreated.Body), string(replayed.Body))
			require.EqualValues(t, 2, a.Count(t, "SELECT count(*) FROM orders"), "one order per key, none of a retry")
		})
	}
}
