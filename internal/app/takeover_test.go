package app_test

import (
	"context"
	"database/sql"
	"net/http"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of database/sql
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestTakeoverResumesTheRefundItsOwnerMade is the red team's schedule (and
// the explorer's TestTakeoverResumesFromThePointItTakes) through two API
// binaries on one PostgreSQL, each move held where the schedule needs it:
//
//  1. instance x reserves a refund's key and waits in phase 1 (the test
//     holds the payment's row), until its lock on the record runs out;
//  2. the client retries through instance y, which reads the record (point
//     "started") and is stopped on its way to take it over (a TCP gate in
//     front of its database holds the statement);
//  3. x goes on: its refund and its intent commit, and its refund is held on
//     the way to the provider;
//  4. y's takeover goes through (a checkpoint does not move the fence).
//
// y must resume x's refund from the point its takeover took: one refund at
// the provider for one request. Before the fix y resumed from the point it
// had read and made a second refund under a new derived key: two refunds
// of 1,000 for one request.
//
// PostgreSQL only: on an SQLite file one writer holds the whole database,
// and the explorer covers that serialised order.
func TestTakeoverResumesTheRefundItsOwnerMade(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, _ := apptest.Binaries(t)
	dbURL := testkit.DatabaseURL(t, database.Postgres)
	prov, err := provider.StartInProcess(context.Background(), provider.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })

	// x's refund is held on the way to the provider; y's takeover on the
	// way to PostgreSQL. Each instance names its connections, so that the
	// test can watch them wait in pg_stat_activity. The reconcilers stay
	// out.
	xProvider := &apptest.Gate{Upstream: prov.URL, Hold: func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Path == "/v1/refunds"
	}}
	hosts, err := testkit.PostgresHosts(dbURL)
	require.NoError(t, err)
	yDatabase := &testkit.SQLGate{Upstream: hosts[0], Pattern: []byte("SET fence = fence + 1")}
	named := func(name string, via ...string) string {
		u, err := testkit.WithQuery(dbURL, "application_name", name)
		require.NoError(t, err)
		if len(via) > 0 {
			u, err = testkit.WithHosts(u, via...)
			require.NoError(t, err)
		}
		return u
	}
	suffix := apptest.NewKey()
	xName := "x-" + suffix
	windows := []string{"IDEMPOTENCY_LOCK_TIMEOUT=2s", "PROVIDER_TIMEOUT=1s", "IDEMPOTENCY_WAIT=100ms", "RECONCILE_INTERVAL=1h"}
	x := apptest.StartBinary(t, apiBin, named(xName), apptest.Env(append(windows, "PROVIDER_URL="+xProvider.Start(t))...))
	y := apptest.StartBinary(t, apiBin, named("y-"+suffix, yDatabase.Start(t)), apptest.Env(append(windows, "PROVIDER_URL="+prov.URL)...))

	order := y.CreateOrder(t, "sk_test_acme")
	paid := y.Pay(t, order, apptest.NewKey(), "pm_card_visa")
	require.Equal(t, http.StatusCreated, paid.Status, string(paid.Body))
	payment := paid.JSON(t)["id"].(string)

	db, err := sql.Open("pgx", dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	key := apptest.NewKey()
	refund := func(api *apptest.API, into chan<- apptest.Answer) {
		a, err := apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/payments/" + payment + "/refunds",
			APIKey: "sk_test_acme", Key: key, Body: `{"amount":1000}`})
		if err != nil {
			a = apptest.Answer{Body: []byte(err.Error())}
		}
		into <- a
	}
	wait := func(what string, ch <-chan struct{}) {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("not within 30s: %s", what)
		}
	}

	// 1. x reserves the key and waits on the payment's row in phase 1.
	paymentRow, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = paymentRow.Rollback() })
	_, err = paymentRow.ExecContext(ctx, `SELECT 1 FROM payments WHERE id = $1 FOR UPDATE`, payment)
	require.NoError(t, err)
	fromX, fromY := make(chan apptest.Answer, 1), make(chan apptest.Answer, 1)
	go refund(x, fromX)
	testkit.Eventually(t, 30*time.Second, "x waits in phase 1, its lock run out", func() bool {
		var waiting, expired int
		require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE application_name = $1 AND wait_event_type = 'Lock' AND query ILIKE '%payments%FOR UPDATE%'`, xName).Scan(&waiting))
		require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM idempotency_records
WHERE idempotency_key = $1 AND state = 'executing' AND recovery_point = 'started' AND locked_until < now()`, key).Scan(&expired))
		return waiting == 1 && expired == 1
	})

	// 2. y reads the record ("started") and is stopped before its takeover.
	go refund(y, fromY)
	wait("y's takeover reaches the gate", yDatabase.Arrived())

	// 3. x commits its refund and its intent, and sends the refund.
	require.NoError(t, paymentRow.Commit())
	wait("x's refund reaches the provider's gate", xProvider.Arrived())

	// 4. y takes the record over.
	yDatabase.Release()
	second := <-fromY
	xProvider.Release()
	first := <-fromX
	t.Logf("x answered %d %s; y answered %d %s", first.Status, first.Body, second.Status, second.Body)

	var refunds []string
	rows, err := db.QueryContext(ctx, `SELECT id FROM refunds WHERE payment_id = $1`, payment)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		refunds = append(refunds, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, refunds, 1, "one refund for one request")
	require.Len(t, apptest.Ledger(t, prov.URL+"/v1/refunds?reference="+refunds[0]), 1, "refunded once at the provider")

	// However the two answered, the key settles on that one refund, and
	// the payment shows 1,000 refunded.
	var final apptest.Answer
	testkit.Eventually(t, 30*time.Second, "the key's final answer", func() bool {
		final = apptest.Call(t, "POST", y.URL+"/v1/payments/"+payment+"/refunds", "sk_test_acme", key, `{"amount":1000}`)
		return final.Status == http.StatusCreated
	})
	require.Equal(t, refunds[0], final.JSON(t)["id"])
	again := apptest.Call(t, "POST", x.URL+"/v1/payments/"+payment+"/refunds", "sk_test_acme", key, `{"amount":1000}`)
	require.Equal(t, string(final.Body), string(again.Body), "the same answer on either instance")
	p := apptest.Call(t, "GET", y.URL+"/v1/payments/"+payment, "sk_test_acme", "", "").JSON(t)
	require.EqualValues(t, 1000, p["amount_refunded"])
}
