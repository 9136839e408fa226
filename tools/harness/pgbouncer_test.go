package harness

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestFailoverBehindPgBouncers is the topology of Compose's ha profile: a
// primary and a standby, a PgBouncer in transaction mode in front of each
// (testkit.PgBouncerSettings), and a pool whose URL names both PgBouncers
// (FailoverParams, the exec query mode). The primary's machine dies and the
// standby is promoted: the pool writes again without being told, through
// the other PgBouncer, once the first one gives up on its dead server and
// closes the connection (query_wait_timeout). How long that took is logged.
func TestFailoverBehindPgBouncers(t *testing.T) {
	primary, standby, _ := startPair(t)
	var hosts []string
	for _, pg := range []*Postgres{primary, standby} {
		dir, err := os.MkdirTemp("", "pgbouncer-") // the user postgres must reach it
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		out := &testkit.SyncBuffer{}
		b, err := testkit.RunPgBouncer(dir, pg.Addr, out)
		if err != nil {
			testkit.MissingService(t, "pgbouncer", err)
		}
		t.Cleanup(func() {
			b.Kill()
			if t.Failed() {
				t.Logf("pgbouncer in front of %s:\n%s", pg.Addr, out.String())
			}
		})
		hosts = append(hosts, b.Addr)
	}
	url, err := FailoverURL("h", hosts...)
	if err == nil {
		url, err = testkit.WithQuery(url, "default_query_exec_mode", testkit.PgBouncerExecMode)
	}
	if err != nil {
		t.Fatal(err)
	}
	db, err := database.Open(url, database.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for i := range 10 {
		if err := db.Exec("INSERT INTO t VALUES (?)", i).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := primary.WaitReplayed(standby, time.Minute); err != nil {
		t.Fatal(err)
	}

	if err := primary.KillMachine(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	testkit.Eventually(t, 2*time.Minute, "a write through the pool after the promotion", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return db.WithContext(ctx).Exec("INSERT INTO t VALUES (100)").Error == nil
	})
	t.Logf("the pool wrote again %.1f s after the promotion", time.Since(promoted).Seconds())
	var n int64
	if err := db.Raw("SELECT count(*) FROM t").Row().Scan(&n); err != nil || n != 11 {
		t.Fatalf("the new primary holds %d rows (%v), want the 10 replicated and the new one", n, err)
	}
}
