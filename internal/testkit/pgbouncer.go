package testkit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// PgBouncerSettings are the [pgbouncer] settings that decide what the API
// meets behind PgBouncer. The private PgBouncer of the tests runs with
// them, and so does deploy/pgbouncer/pgbouncer.ini, the one of Compose's ha
// profile: a test holds the two equal.
//
//   - pool_mode=transaction: a server connection serves a client for one
//     transaction, so session state (prepared statements, SET, advisory
//     locks) does not follow the client. The API needs
//     default_query_exec_mode=exec (or simple_protocol) in DATABASE_URL,
//     and its migrations a direct URL (MIGRATE_DATABASE_URL).
//   - query_wait_timeout: how long a query waits for a server connection
//     before PgBouncer gives up on it and closes the client's connection
//     (default 120 s); the API's own timeouts are shorter, and a closed
//     connection is what makes pgx try the next host.
//   - server_login_retry: how long PgBouncer waits after a failed server
//     login before trying again (default 15 s): the time a restarted or
//     promoted server stays unreachable through it.
//   - ignore_startup_parameters: the API asks for lock_timeout and
//     idle_in_transaction_session_timeout at the start of each connection
//     (DB_LOCK_TIMEOUT, DB_IDLE_IN_TRANSACTION_TIMEOUT), which PgBouncer
//     refuses unless told to ignore them; behind it they are settings of
//     the role (or database) instead, which every server connection has.
var PgBouncerSettings = map[string]string{
	"pool_mode":                 "transaction",
	"default_pool_size":         "20",
	"max_client_conn":           "1000",
	"query_wait_timeout":        "5",
	"server_login_retry":        "1",
	"ignore_startup_parameters": "lock_timeout,idle_in_transaction_session_timeout",
}

// PgBouncerExecMode is the query mode pgx must use behind PgBouncer 1.18 in
// transaction mode (the default mode prepares and caches statements on
// whichever server connection it had): exec sends each statement as an
// unnamed prepared statement, parsed and run in one round trip.
const PgBouncerExecMode = "exec"

// PgBouncer is a private PgBouncer on a free loopback port, in front of one
// PostgreSQL server, forwarding every database name to the same database
// there. It trusts its clients (the user must be in its auth file, which
// holds "postgres") and logs in to the server as they do.
type PgBouncer struct {
	*Process
	dir string
}

// RunPgBouncer starts a PgBouncer in front of upstream (host:port), with
// PgBouncerSettings, its files in dir, its output going to log. PgBouncer
// refuses to run as root; as root it runs as the user postgres. The caller
// kills it.
func RunPgBouncer(dir, upstream string, log io.Writer) (*PgBouncer, error) {
	bin, err := LookPath("pgbouncer", "/usr/sbin")
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: %w", upstream, err)
	}
	addr, err := FindFreeAddr()
	if err != nil {
		return nil, err
	}
	_, listenPort, _ := net.SplitHostPort(addr)
	cred, err := nonRoot()
	if err != nil {
		return nil, err
	}
	var ini strings.Builder
	fmt.Fprintf(&ini, "[databases]\n* = host=%s port=%s\n\n[pgbouncer]\n", host, port)
	fmt.Fprintf(&ini, "listen_addr = 127.0.0.1\nlisten_port = %s\nunix_socket_dir =\n", listenPort)
	fmt.Fprintf(&ini, "auth_type = trust\nauth_file = %s\n", filepath.Join(dir, "userlist.txt"))
	fmt.Fprintf(&ini, "pidfile = %s\n", filepath.Join(dir, "pgbouncer.pid"))
	ini.WriteString("admin_users = postgres\n") // its console answers the readiness check
	for _, k := range slices.Sorted(maps.Keys(PgBouncerSettings)) {
		fmt.Fprintf(&ini, "%s = %s\n", k, PgBouncerSettings[k])
	}
	files := map[string]string{"pgbouncer.ini": ini.String(), "userlist.txt": `"postgres" ""` + "\n"}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	if cred != nil {
		for _, p := range []string{dir, filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "userlist.txt")} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	b := &PgBouncer{dir: dir, Process: &Process{
		Name:       "pgbouncer",
		Path:       bin,
		Args:       []string{filepath.Join(dir, "pgbouncer.ini")},
		Addr:       addr,
		Log:        log,
		Credential: cred,
	}}
	b.Ready = b.ping
	if err := b.Start(30 * time.Second); err != nil {
		return nil, err
	}
	return b, nil
}

// StartPgBouncer runs a PgBouncer in front of the tests' PostgreSQL server
// (the first host of PostgresURL) for as long as the test. A missing
// pgbouncer skips the test, or fails it under CI=true.
func StartPgBouncer(t testing.TB) *PgBouncer {
	t.Helper()
	hosts, err := PostgresHosts(PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer-") // not under t.TempDir: the user postgres must reach it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	out := &SyncBuffer{}
	b, err := RunPgBouncer(dir, hosts[0], out)
	if errors.Is(err, ErrMissing) {
		MissingService(t, "pgbouncer", err)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Cleanup(func() {
		b.Kill()
		if t.Failed() {
			t.Logf("pgbouncer output:\n%s", out.String())
		}
	})
	return b
}

// URL is the PostgreSQL URL of database db through the PgBouncer, with
// the query mode pgx needs there.
func (b *PgBouncer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&default_query_exec_mode=%s", b.Addr, db, PgBouncerExecMode)
}

// ping asks PgBouncer's own console (the database pgbouncer) whether it
// answers, so that readiness does not depend on the server behind it.
func (b *PgBouncer) ping() bool {
	db, err := sql.Open("pgx", fmt.Sprintf("postgres://postgres@%s/pgbouncer?sslmode=disable&default_query_exec_mode=simple_protocol", b.Addr))
	if err != nil {
		return false
	}
	defer func() { _ = db.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, "SHOW VERSION")
	return err == nil
}

// NewPostgresDatabase makes an empty database of its own on the tests'
// PostgreSQL server, dropped when the test ends, and returns its URL and
// its name. A
// test that goes through PgBouncer in transaction mode needs a database
// rather than a schema: the search_path of DatabaseURL is a session
// setting, which does not follow a client from one server connection to
// the next (PgBouncer 1.18 refuses it as a startup parameter).
func NewPostgresDatabase(t testing.TB) (url, name string) {
	t.Helper()
	base := PostgresURL()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		MissingService(t, "PostgreSQL", err)
	}
	name = "t_" + randomHex(6)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE: a pooler may still hold server connections to it.
		_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	if url, err = WithDatabase(base, name); err != nil {
		t.Fatal(err)
	}
	return url, name
}

// nonRoot is the user postgres when this process is root (PgBouncer and
// PostgreSQL refuse root), nil otherwise.
func nonRoot() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, pgbouncer needs the user postgres: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
