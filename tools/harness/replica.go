package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkeys/payments/internal/testkit"
)

// StandbyName is the application_name a standby streams under: what a
// primary's synchronous_standby_names lists to wait for it.
const StandbyName = "standby1"

// StandbySettings are the settings a standby runs with beyond the
// defaults; docker-compose.yml's replica runs with the same (a test holds
// them equal).
//
// wal_retrieve_retry_interval is how long a standby whose primary is gone
// waits before it looks for write-ahead log again; a promotion that arrives
// meanwhile waits for it too (seen here: 5 s, the default, between
// pg_promote and the end of recovery).
var StandbySettings = []string{"hot_standby=on", "wal_retrieve_retry_interval=250ms"}

// FailoverParams are the query parameters of a URL naming a primary and
// its standbys (or a PgBouncer in front of each): pgx connects to the one
// that accepts writes, and gives up on a host that does not answer within
// connect_timeout seconds, so that a dead primary's address does not hold
// every new connection up. The failover scenarios of tools/chaos and
// Compose's ha profile use the same (a test holds them equal).
var FailoverParams = [][2]string{{"target_session_attrs", "read-write"}, {"connect_timeout", "5"}}

// FailoverURL is a URL of database db on hosts (host:port each, the
// primary first) with FailoverParams.
func FailoverURL(db string, hosts ...string) (string, error) {
	url, err := testkit.WithHosts("postgres://postgres@127.0.0.1/"+db+"?sslmode=disable", hosts...)
	for _, p := range FailoverParams {
		if err == nil {
			url, err = testkit.WithQuery(url, p[0], p[1])
		}
	}
	return url, err
}

// StartStandby makes a streaming standby of pg: a base backup of the
// running primary (pg_basebackup, the write-ahead log streamed beside it),
// started on a port of its own in hot standby, and streaming from upstream,
// a host:port that leads to pg (pg itself, or a Link in between that a test
// may stall). It returns once the standby serves read-only queries; the
// caller closes it.
func (pg *Postgres) StartStandby(upstream string, log io.Writer) (*Postgres, error) {
	basebackup, err := testkit.LookPath("pg_basebackup", PostgresBinaries)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "harness-standby-")
	if err != nil {
		return nil, err
	}
	standby, err := pg.startStandby(dir, basebackup, upstream, log)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return standby, nil
}

func (pg *Postgres) startStandby(dir, basebackup, upstream string, log io.Writer) (*Postgres, error) {
	cred, err := ownedByPostgres(dir)
	if err != nil {
		return nil, err
	}
	// --checkpoint=fast: the backup starts at once instead of at the
	// primary's next checkpoint. -R writes standby.signal, so the copy
	// starts as a standby; its primary_conninfo is set below.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, basebackup, "-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "postgres",
		"-D", filepath.Join(dir, "pgdata"), "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	host, port, ok := strings.Cut(upstream, ":")
	if !ok {
		return nil, fmt.Errorf("upstream %q: want host:port", upstream)
	}
	settings := append([]string{
		fmt.Sprintf("primary_conninfo=host=%s port=%s user=postgres application_name=%s", host, port, StandbyName),
	}, StandbySettings...)
	standby, err := newServer(dir, log, settings...)
	if err != nil {
		return nil, err
	}
	standby.Name = "postgres-standby"
	if err := standby.Start(2 * time.Minute); err != nil {
		return nil, err
	}
	return standby, nil
}

// WaitStreaming waits, up to within, until a standby named StandbyName
// streams from the primary pg.
func (pg *Postgres) WaitStreaming(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		out, err := pg.Query("postgres", "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND application_name = '"+StandbyName+"'")
		if err == nil && out == "1" {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("no standby streaming from 127.0.0.1:%d within %s: %w", pg.port, within, err)
			}
			return fmt.Errorf("no standby streaming from 127.0.0.1:%d within %s (%s)", pg.port, within, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SetSynchronous makes the primary pg wait, at every commit, until the
// standby has flushed the commit's write-ahead log (synchronous_commit=on,
// the default, with synchronous_standby_names naming StandbyName), or,
// with sync false, stop waiting. It is set while the server runs (ALTER
// SYSTEM and a reload), after the standby was made: a primary that waits
// for a standby that does not exist yet would block every commit.
func (pg *Postgres) SetSynchronous(sync bool) error {
	names := ""
	if sync {
		names = StandbyName
	}
	if err := pg.Exec("postgres", "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'"); err != nil {
		return err
	}
	if err := pg.Exec("postgres", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	want := "async"
	if sync {
		want = "sync"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := pg.Query("postgres", "SELECT coalesce(max(sync_state), 'none') FROM pg_stat_replication WHERE application_name = '"+StandbyName+"'")
		if err == nil && out == want {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the standby's sync_state: %w", err)
			}
			return fmt.Errorf("the standby's sync_state is %q, want %q", out, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WALPosition is the server's current write-ahead log position in bytes:
// pg_current_wal_lsn() on a primary, the last position replayed on a
// standby. It asks over a connection kept open (see conn), so that the
// answer is not late by a psql start on a busy machine.
func (pg *Postgres) WALPosition() (int64, error) {
	db, err := pg.conn()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pos int64
	err = db.QueryRowContext(ctx, `SELECT CASE WHEN pg_is_in_recovery()
		THEN pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')
		ELSE pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') END::bigint`).Scan(&pos)
	return pos, err
}

// WaitReplayed waits, up to within, until the standby has replayed the
// primary pg's write-ahead log up to where it is now: every commit made
// so far is on the standby.
func (pg *Postgres) WaitReplayed(standby *Postgres, within time.Duration) error {
	target, err := pg.WALPosition()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	for {
		at, err := standby.WALPosition()
		if err == nil && at >= target {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the standby's position: %w", err)
			}
			return fmt.Errorf("the standby replayed to %d, not %d, within %s", at, target, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Promote makes the standby pg a primary (pg_promote, waiting for the end
// of recovery) and returns once it accepts writes.
func (pg *Postgres) Promote() error {
	db, err := pg.conn()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var promoted bool
	if err := db.QueryRowContext(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil {
		return err
	}
	if !promoted {
		return errors.New("pg_promote: the standby was not promoted within 60 s")
	}
	return nil
}

// KillMachine stops the server as a power cut of its machine would: every
// one of its processes gets SIGKILL at once, so no backend finishes a
// commit, no walsender sends another byte, and nothing is written on the
// way out. (Kill alone would SIGKILL only the postmaster: its backends,
// each in a session of its own, notice only at their next wait and may
// still commit meanwhile.) The postmaster is frozen first, so it forks no
// new backend while they are being listed.
func (pg *Postgres) KillMachine() error {
	pid := pg.Pid()
	if pid == 0 {
		return errors.New("the server is not running")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	children, err := childrenOf(pid)
	for _, c := range children {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	pg.Kill() // SIGKILL ends a stopped process too; waits for it
	return err
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid ...": comm may hold spaces and
		// parentheses, so the fields are counted after its last ')'.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out, nil
}
