package database_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/storetest"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestThroughPgBouncer runs the PostgreSQL core behind a private PgBouncer
// in transaction mode (testkit.PgBouncerSettings, the same as Compose's ha
// profile), as a deployment with a pooler does: the idempotency store's
// whole contract (insert-if-absent under concurrency, takeover with
// fencing, joined transactions) in each query mode PgBouncer 1.18 can
// carry, then the API itself, two instances started at once on an empty
// database, migrating over MIGRATE_DATABASE_URL, serving orders, payments,
// replays, a storm on one key, a lost provider answer and a refund.
func TestThroughPgBouncer(t *testing.T) {
	testkit.EndToEnd(t)
	bouncer := testkit.StartPgBouncer(t)

	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run("store contract/"+mode, func(t *testing.T) {
			direct, name := testkit.NewPostgresDatabase(t)
			ddl, err := gormstore.Schema("postgres")
			require.NoError(t, err)
			admin, err := database.Open(direct, database.Options{MaxOpenConns: 1})
			require.NoError(t, err)
			require.NoError(t, admin.Exec(ddl).Error)
			require.NoError(t, admin.Close())

			url, err := testkit.WithQuery(bouncer.URL(name), "default_query_exec_mode", mode)
			require.NoError(t, err)
			db, err := database.Open(url, database.Options{MaxOpenConns: 10})
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			s := gormstore.New(db.DB)
			storetest.Run(t, storetest.Subject{Store: s, Tx: s})
		})
	}

	t.Run("api", func(t *testing.T) { apiThroughPgBouncer(t, bouncer) })
}

func apiThroughPgBouncer(t *testing.T, bouncer *testkit.PgBouncer) {
	apiBin, providerBin := apptest.Binaries(t)
	direct, name := testkit.NewPostgresDatabase(t)
	// PgBouncer ignores the API's start-up settings: the bounds on lock
	// waits are the database's (or the role's), as Compose's ha profile
	// sets them (deploy/postgres/settings.sh).
	for _, setting := range []string{"lock_timeout = '5s'", "idle_in_transaction_session_timeout = '10s'"} {
		require.NoError(t, execOn(direct, "ALTER DATABASE "+name+" SET "+setting))
	}
	addrs := []string{testkit.FreeAddr(t), testkit.FreeAddr(t)}
	prov := testkit.StartProcess(t, providerBin, testkit.FreeAddr(t),
		"WEBHOOK_URL=http://"+addrs[0]+"/v1/webhooks/provider", "CHAOS_LATENCY=20ms")
	env := []string{
		"DATABASE_URL=" + bouncer.URL(name),
		"MIGRATE_DATABASE_URL=" + direct,
		"PROVIDER_URL=http://" + prov.Addr,
		"PROVIDER_TIMEOUT=1s", "RECONCILE_INTERVAL=200ms", "IDEMPOTENCY_LOCK_TIMEOUT=2s",
		"DEMO_SEED=true", "LOG_LEVEL=warn", "DB_MAX_CONNS=10", "RATE_LIMIT_NEW_KEYS=0",
	}
	// The migrations go where MIGRATE_DATABASE_URL says, not through the
	// pooler: a dead one stops `api migrate`, naming the setting, and
	// nothing is migrated.
	migrate := exec.CommandContext(t.Context(), apiBin, "migrate")
	migrate.Env = append(os.Environ(), "DATABASE_URL="+bouncer.URL(name), "DB_CONNECT_TIMEOUT=1s",
		"MIGRATE_DATABASE_URL=postgres://postgres@"+testkit.FreeAddr(t)+"/"+name+"?sslmode=disable")
	out, err := migrate.CombinedOutput()
	require.Error(t, err, string(out))
	require.Contains(t, string(out), "MIGRATE_DATABASE_URL")
	require.EqualValues(t, 0, testkit.Count(t, direct, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"))

	// Both instances start at once on the empty database: one migrates
	// over the direct URL under goose's lock while the other waits.
	apis := make([]*testkit.Process, len(addrs))
	logs := make([]*testkit.SyncBuffer, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		logs[i] = &testkit.SyncBuffer{}
		apis[i] = &testkit.Process{Name: fmt.Sprintf("api%d", i+1), Path: apiBin, Addr: addr, Log: logs[i],
			Env: append([]string{"HTTP_ADDR=" + addr}, env...)}
		t.Cleanup(func() {
			apis[i].Kill()
			if t.Failed() {
				t.Logf("api%d output:\n%s", i+1, logs[i].String())
			}
		})
		wg.Go(func() { errs[i] = apis[i].Start(2 * time.Minute) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err)
		require.NotContains(t, logs[i].String(), "row-lock waits are not bounded", "the database's bounds reach the API through PgBouncer")
	}
	url := func(i int, path string) string { return "http://" + addrs[i%2] + path }
	const acme = "sk_test_acme"

	// An order and its payment, then the same payment on the other
	// instance: the stored answer, replayed.
	order := apptest.Call(t, "POST", url(0, "/v1/orders"), acme, apptest.NewKey(), apptest.OrderBody)
	require.Equal(t, http.StatusCreated, order.Status, string(order.Body))
	orderID := order.JSON(t)["id"].(string)
	payKey := apptest.NewKey()
	pay := func(i int, orderID, key, method string) apptest.Answer {
		return apptest.Call(t, "POST", url(i, "/v1/orders/"+orderID+"/payments"), acme, key, `{"payment_method":"`+method+`"}`)
	}
	first := pay(0, orderID, payKey, "pm_card_visa")
	require.Equal(t, http.StatusCreated, first.Status, string(first.Body))
	again := pay(1, orderID, payKey, "pm_card_visa")
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Body), string(again.Body))
	paymentID := first.JSON(t)["id"].(string)

	// A refund, replayed.
	refundKey := apptest.NewKey()
	refund := apptest.Call(t, "POST", url(1, "/v1/payments/"+paymentID+"/refunds"), acme, refundKey, `{"amount":500}`)
	require.Equal(t, http.StatusCreated, refund.Status, string(refund.Body))
	refundAgain := apptest.Call(t, "POST", url(0, "/v1/payments/"+paymentID+"/refunds"), acme, refundKey, `{"amount":500}`)
	require.Equal(t, string(refund.Body), string(refundAgain.Body))

	// A storm: twenty requests on one key across both instances make one
	// payment and one charge.
	storm := apptest.Call(t, "POST", url(0, "/v1/orders"), acme, apptest.NewKey(), apptest.OrderBody).JSON(t)["id"].(string)
	stormKey := apptest.NewKey()
	answers := make([]apptest.Answer, 20)
	var storms sync.WaitGroup
	giveUp := time.Now().Add(time.Minute)
	for i := range answers {
		storms.Go(func() {
			for time.Now().Before(giveUp) {
				a, err := apptest.Do(apptest.Request{Method: "POST", URL: url(i, "/v1/orders/"+storm+"/payments"), APIKey: acme,
					Key: stormKey, Body: `{"payment_method":"pm_card_visa"}`})
				answers[i] = a
				if err == nil && a.Status != http.StatusConflict {
					return
				}
				time.Sleep(50 * time.Millisecond) // 409 in progress: as a client told Retry-After
			}
		})
	}
	storms.Wait()
	for _, a := range answers {
		require.Equal(t, http.StatusCreated, a.Status, string(a.Body))
		require.Equal(t, string(answers[0].Body), string(a.Body))
	}
	stormPayment := answers[0].JSON(t)["id"].(string)

	// A declined card is 402; a lost provider answer is found by key at
	// once (201) or left to the reconciler (202), which settles it.
	declined := apptest.Call(t, "POST", url(0, "/v1/orders"), acme, apptest.NewKey(), apptest.OrderBody).JSON(t)["id"].(string)
	require.Equal(t, http.StatusPaymentRequired, pay(1, declined, apptest.NewKey(), "pm_card_declined").Status)
	lostOrder := apptest.Call(t, "POST", url(0, "/v1/orders"), acme, apptest.NewKey(), apptest.OrderBody).JSON(t)["id"].(string)
	lost := pay(0, lostOrder, apptest.NewKey(), "pm_fault_lost_response")
	require.Contains(t, []int{http.StatusCreated, http.StatusAccepted}, lost.Status, string(lost.Body))
	lostID := lost.JSON(t)["id"].(string)
	testkit.Eventually(t, 30*time.Second, "the lost answer is settled", func() bool {
		a, err := apptest.Do(apptest.Request{Method: "GET", URL: url(1, "/v1/payments/"+lostID), APIKey: acme})
		return err == nil && a.Status == http.StatusOK && a.JSON(t)["status"] == "succeeded"
	})

	// The effects, read on the server directly: one charge per payment at
	// the provider, the rows, the migrations.
	for _, id := range []string{paymentID, stormPayment, lostID} {
		require.Len(t, apptest.Ledger(t, "http://"+prov.Addr+"/v1/charges?reference="+id), 1, id)
	}
	require.Len(t, apptest.Ledger(t, "http://"+prov.Addr+"/v1/refunds?reference="+refund.JSON(t)["id"].(string)), 1)
	require.EqualValues(t, 4, testkit.Count(t, direct, "SELECT count(*) FROM payments"))
	require.EqualValues(t, 1, testkit.Count(t, direct, "SELECT count(*) FROM payments WHERE order_id = ?", storm))
	require.EqualValues(t, 1, testkit.Count(t, direct, "SELECT count(*) FROM refunds"))
	require.EqualValues(t, 0, testkit.Count(t, direct, "SELECT count(*) FROM idempotency_records WHERE state = 'executing'"))
	require.Positive(t, testkit.Count(t, direct, "SELECT count(*) FROM goose_db_version"))
	for i, p := range apis {
		require.True(t, p.Running(), "api%d exited", i+1)
	}
}

// execOn runs one statement on the database at url.
func execOn(url, stmt string) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(stmt)
	return err
}
