package app_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/problem"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// The isolation tests freeze one API instance inside a payment's phase 3,
// holding row locks, as a SIGSTOP, a frozen VM or a long GC does: a TCP
// gate in front of its database (testkit.SQLGate) holds its next statement,
// so its transaction stays open, idle, with its locks. Another instance on
// the same PostgreSQL must go on serving every other merchant.

// frozenPair starts instance x, whose database connections pass through a
// gate that freezes it at the first statement matching pattern, and
// instance y, both on one fresh PostgreSQL database and one provider, and
// returns them with the gate and a plain connection to the database.
func frozenPair(t *testing.T, pattern string, env ...string) (x, y *apptest.API, gate *testkit.SQLGate, db *sql.DB, prov *provider.Running) {
	t.Helper()
	apiBin, _ := apptest.Binaries(t)
	dbURL := testkit.DatabaseURL(t, database.Postgres)
	prov, err := provider.StartInProcess(context.Background(), provider.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	hosts, err := testkit.PostgresHosts(dbURL)
	require.NoError(t, err)
	gate = &testkit.SQLGate{Upstream: hosts[0], Pattern: []byte(pattern)}
	viaGate, err := testkit.WithHosts(dbURL, gate.Start(t))
	require.NoError(t, err)
	common := append([]string{"PROVIDER_URL=" + prov.URL, "IDEMPOTENCY_LOCK_TIMEOUT=2s", "PROVIDER_TIMEOUT=1s",
		"IDEMPOTENCY_WAIT=200ms", "RECONCILE_INTERVAL=1s"}, env...)
	// x's own background work stays idle: only its request is frozen.
	x = apptest.StartBinary(t, apiBin, viaGate, apptest.Env(append(common, "OUTBOX_INTERVAL=1h", "JANITOR_INTERVAL=1h", "RECONCILE_INTERVAL=1h")...))
	y = apptest.StartBinary(t, apiBin, dbURL, apptest.Env(common...))
	db, err = sql.Open("pgx", dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return x, y, gate, db, prov
}

// freeze pays a new acme order on x, which freezes inside the payment's
// phase 3 at the gate, and returns the order.
func freeze(t *testing.T, x, y *apptest.API, gate *testkit.SQLGate) string {
	t.Helper()
	order := y.CreateOrder(t, "sk_test_acme")
	go func() { _, _ = apptest.Do(payRequest(x.URL, order, apptest.NewKey())) }()
	select {
	case <-gate.Arrived():
	case <-time.After(30 * time.Second):
		t.Fatal("x did not reach phase 3")
	}
	return order
}

// TestFrozenOwnerDelaysOnlyItsOwnCall: x freezes in phase 3 of an acme
// payment, holding the payment's outside call (and its order); on y, a
// globex payment whose provider answer is lost must still be settled by
// y's reconciler, within two rounds of one second, while x holds its locks.
// Before, y's round reached acme's due call first, waited on its row for
// as long as x was frozen, and every call behind it waited too (38 s for a
// 38 s freeze).
func TestFrozenOwnerDelaysOnlyItsOwnCall(t *testing.T) {
	testkit.EndToEnd(t)
	// The server would end x's session after DB_IDLE_IN_TRANSACTION_TIMEOUT
	// and free its locks; here x stays frozen for the whole test.
	x, y, gate, db, _ := frozenPair(t, "UPDATE payments SET status", "DB_IDLE_IN_TRANSACTION_TIMEOUT=0")
	freeze(t, x, y, gate)

	// acme's call is due on y once x's lock has run out.
	testkit.Eventually(t, 30*time.Second, "acme's call is due", func() bool {
		var n int
		require.NoError(t, db.QueryRow(`SELECT count(*) FROM outside_calls WHERE state = 'calling' AND due_at < now()`).Scan(&n))
		return n == 1
	})
	order := y.CreateOrder(t, "sk_test_globex")
	lost := apptest.Call(t, "POST", y.URL+"/v1/orders/"+order+"/payments", "sk_test_globex", apptest.NewKey(), `{"payment_method":"pm_fault_lost_response"}`)
	require.Equal(t, http.StatusAccepted, lost.Status, string(lost.Body))
	id := lost.JSON(t)["id"].(string)
	answered := time.Now()
	testkit.Eventually(t, 20*time.Second, "globex's payment settles while x is frozen", func() bool {
		p := apptest.Call(t, "GET", y.URL+"/v1/payments/"+id, "sk_test_globex", "", "").JSON(t)
		return p["status"] == "succeeded"
	})
	settled := time.Since(answered)
	t.Logf("globex's lost-response payment settled %v after its 202, x frozen all along", settled.Round(10*time.Millisecond))
	var frozen int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'`).Scan(&frozen))
	require.GreaterOrEqual(t, frozen, 1, "x still held its transaction")
	require.Less(t, settled, 5*time.Second, "settled within a few rounds, not after the freeze")
}

// TestHotRowCannotDrainThePool: x freezes in phase 3 holding an acme
// order's row; 25 requests add items to that order through y, each with a
// new key. They must not take y's pool (20 connections) for themselves: a
// globex list on y answers at once, and each of the 25 gets 503 with
// Retry-After once its wait runs out (at most DB_LOCK_TIMEOUT), with
// nothing done. Before, the 25 queued on the row holding every connection,
// and globex's list took 36.8 s.
func TestHotRowCannotDrainThePool(t *testing.T) {
	testkit.EndToEnd(t)
	x, y, gate, db, _ := frozenPair(t, "UPDATE orders SET status", "DB_IDLE_IN_TRANSACTION_TIMEOUT=0", "DB_LOCK_TIMEOUT=3s")
	order := freeze(t, x, y, gate)

	answers := make([]apptest.Answer, 25)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			answers[i], _ = apptest.Do(apptest.Request{Method: "POST", URL: y.URL + "/v1/orders/" + order + "/items",
				APIKey: "sk_test_acme", Key: apptest.NewKey(),
				Body: `{"sku":"SKU-2","name":"Tea","quantity":1,"unit_amount":500}`})
		})
	}
	testkit.Eventually(t, 30*time.Second, "y's writes wait on the order's row", func() bool {
		var n int
		require.NoError(t, db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&n))
		return n >= 1
	})
	start := time.Now()
	list := apptest.Call(t, "GET", y.URL+"/v1/orders?limit=5", "sk_test_globex", "", "")
	took := time.Since(start)
	require.Equal(t, http.StatusOK, list.Status, string(list.Body))
	t.Logf("globex's list answered in %v beside 25 writes queued on one row", took.Round(time.Millisecond))
	require.Less(t, took, 2*time.Second)

	wg.Wait()
	for i, a := range answers {
		require.Equal(t, http.StatusServiceUnavailable, a.Status, "request %d: %s", i, a.Body)
		require.Equal(t, problem.CodeServiceUnavailable, answerCode(a))
		require.Equal(t, "1", a.Header.Get("Retry-After"))
	}
	var items int
	require.NoError(t, db.QueryRow(`SELECT jsonb_array_length(items) FROM orders WHERE id = $1`, order).Scan(&items))
	require.Equal(t, 1, items, "nothing was added")
	var records int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM idempotency_records WHERE path LIKE $1`, "%/items").Scan(&records))
	require.Zero(t, records, "no key kept: each may be sent again")
}

// TestLockWaitInPhaseThreeAnswersProcessing: the provider charged, and
// phase 3 cannot lock the order (another transaction holds it past
// DB_LOCK_TIMEOUT). The answer must be 202 processing, never 503 "nothing
// was done", and the reconciler must settle the charge once the order is
// free: one charge, the key's final answer 201.
func TestLockWaitInPhaseThreeAnswersProcessing(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, _ := apptest.Binaries(t)
	dbURL := testkit.DatabaseURL(t, database.Postgres)
	prov, err := provider.StartInProcess(context.Background(), provider.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	gate := &apptest.Gate{Upstream: prov.URL, After: true}
	api := apptest.StartBinary(t, apiBin, dbURL, apptest.Env("PROVIDER_URL="+gate.Start(t), "IDEMPOTENCY_LOCK_TIMEOUT=2s",
		"PROVIDER_TIMEOUT=1500ms", "IDEMPOTENCY_WAIT=200ms", "RECONCILE_INTERVAL=500ms", "DB_LOCK_TIMEOUT=1s"))
	db, err := sql.Open("pgx", dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })

	order := api.CreateOrder(t, "sk_test_acme")
	key := apptest.NewKey()
	answer := make(chan apptest.Answer, 1)
	go func() {
		a, err := apptest.Do(payRequest(api.URL, order, key))
		if err != nil {
			a = apptest.Answer{Body: []byte(err.Error())}
		}
		answer <- a
	}()
	select {
	case <-gate.Arrived(): // charged; the answer is held
	case <-time.After(30 * time.Second):
		t.Fatal("the charge never reached the provider")
	}
	held, err := db.Begin()
	require.NoError(t, err)
	t.Cleanup(func() { _ = held.Rollback() })
	_, err = held.Exec(`SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, order)
	require.NoError(t, err)
	gate.Release()
	first := <-answer
	require.Equal(t, http.StatusAccepted, first.Status, "the charge was made: %s", first.Body)
	require.Equal(t, "processing", first.JSON(t)["status"])
	require.NoError(t, held.Rollback())

	var final apptest.Answer
	testkit.Eventually(t, 30*time.Second, "the key's final answer", func() bool {
		final = apptest.Send(t, payRequest(api.URL, order, key))
		return final.Status == http.StatusCreated
	})
	id := final.JSON(t)["id"].(string)
	require.Len(t, apptest.Ledger(t, prov.URL+"/v1/charges?reference="+id), 1, "one charge")
	o := apptest.Call(t, "GET", api.URL+"/v1/orders/"+order, "sk_test_acme", "", "").JSON(t)
	require.Equal(t, "paid", o["status"], fmt.Sprint(o))
}
