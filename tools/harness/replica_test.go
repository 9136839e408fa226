package harness

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/testkit"
)

// startPair starts a primary and a standby that streams from it through a
// Link, for as long as the test runs.
func startPair(t *testing.T) (primary, standby *Postgres, link *Link) {
	t.Helper()
	testkit.EndToEnd(t)
	primary, err := StartPostgres(io.Discard)
	if err != nil {
		testkit.MissingService(t, "postgres (server binaries)", err)
	}
	t.Cleanup(primary.Close)
	if link, err = StartLink(primary.Addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	if standby, err = primary.StartStandby(link.Addr(), io.Discard); err != nil {
		testkit.MissingService(t, "pg_basebackup", err)
	}
	t.Cleanup(standby.Close)
	if err := primary.WaitStreaming(time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := primary.CreateDatabase("h"); err != nil {
		t.Fatal(err)
	}
	if err := primary.Exec("h", "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	return primary, standby, link
}

// waitRows polls the standby until table t holds want rows.
func waitRows(t *testing.T, pg *Postgres, want string) {
	t.Helper()
	testkit.Eventually(t, time.Minute, "the standby holds "+want+" rows", func() bool {
		out, err := pg.Query("h", "SELECT count(*) FROM t")
		return err == nil && out == want
	})
}

// TestAsynchronousFailoverLosesTheStalledCommits: with asynchronous
// replication stalled, the primary acknowledges commits the standby never
// receives; after the primary's machine dies and the standby is promoted,
// those commits are gone and the rest are there.
func TestAsynchronousFailoverLosesTheStalledCommits(t *testing.T) {
	primary, standby, link := startPair(t)
	if err := primary.Exec("h", "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	waitRows(t, standby, "1")

	link.Stall()
	if err := primary.Exec("h", "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal("an asynchronous commit waited for the stalled standby:", err)
	}
	if err := primary.KillMachine(); err != nil {
		t.Fatal(err)
	}
	if primary.Running() {
		t.Fatal("the primary runs after KillMachine")
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	if out, err := standby.Query("h", "SELECT string_agg(v::text, ',') FROM t"); err != nil || out != "1" {
		t.Fatalf("after promotion t holds %q (%v), want the replicated row only", out, err)
	}
	if err := standby.Exec("h", "INSERT INTO t VALUES (3)"); err != nil {
		t.Fatal("the promoted standby refuses writes:", err)
	}
}

// TestSynchronousFailoverLosesNothingAcknowledged: with synchronous
// replication stalled, a commit waits for the standby (SyncRep) and is never
// acknowledged; the primary's machine dies, the standby is promoted, and
// every commit that was acknowledged is there.
func TestSynchronousFailoverLosesNothingAcknowledged(t *testing.T) {
	primary, standby, link := startPair(t)
	if err := primary.SetSynchronous(true); err != nil {
		t.Fatal(err)
	}
	if err := primary.Exec("h", "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// Acknowledged means flushed on the standby (synchronous_commit=on),
	// not yet replayed there: a query on the standby sees it a moment
	// later, and after a promotion, which replays all that was flushed.
	waitRows(t, standby, "1")

	link.Stall()
	done := make(chan error, 1)
	go func() { done <- primary.Exec("h", "INSERT INTO t VALUES (2)") }()
	testkit.Eventually(t, time.Minute, "a commit waits for the standby", func() bool {
		out, _ := primary.Query("postgres", "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
		return out == "1"
	})
	if err := primary.KillMachine(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the commit that waited for the standby was acknowledged")
	} else if !strings.Contains(err.Error(), "psql") {
		t.Fatal(err)
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	if out, err := standby.Query("h", "SELECT string_agg(v::text, ',') FROM t"); err != nil || out != "1" {
		t.Fatalf("after promotion t holds %q (%v), want the acknowledged row", out, err)
	}
}

// TestLinkStallsAndResumes checks the link alone: bytes pass, are held
// while it is stalled, and pass again after Resume.
func TestLinkStallsAndResumes(t *testing.T) {
	primary, standby, link := startPair(t)
	link.Stall()
	if err := primary.Exec("h", "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// Nothing arrives while stalled: the standby's replay position stays
	// behind the primary's.
	p, err := primary.WALPosition()
	if err != nil {
		t.Fatal(err)
	}
	if s, err := standby.WALPosition(); err != nil || s >= p {
		t.Fatalf("the standby replayed to %d (%v) past the primary's %d while stalled", s, err, p)
	}
	link.Resume()
	waitRows(t, standby, "1")
}
