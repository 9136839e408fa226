package harness

import (
	"io"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/testkit"
)

// TestPostgresSurvivesACrash starts the private cluster, crashes it and
// starts it again, and checks that committed data outlives the crash. (The
// private redis-server's kill and restart are tested in internal/testkit.)
func TestPostgresSurvivesACrash(t *testing.T) {
	testkit.EndToEnd(t)
	pg, err := StartPostgres(io.Discard)
	if err != nil {
		testkit.MissingService(t, "postgres (server binaries)", err)
	}
	t.Cleanup(pg.Close)
	if _, err := pg.CreateDatabase("h"); err != nil {
		t.Fatal(err)
	}
	if err := pg.Exec("h", "CREATE TABLE t (v int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	pg.Crash()
	if pg.Running() {
		t.Fatal("postgres still running after Crash")
	}
	if err := pg.Start(time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := pg.Exec("h", "DO $$ BEGIN IF (SELECT count(*) FROM t) <> 1 THEN RAISE 'lost a row'; END IF; END $$"); err != nil {
		t.Fatal(err)
	}

}

func TestPercentile(t *testing.T) {
	var l Latencies
	for i := 1; i <= 100; i++ {
		l.Add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := l.Percentile(c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	var empty Latencies
	if empty.Percentile(50) != 0 {
		t.Error("empty percentile not zero")
	}
}
