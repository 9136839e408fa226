// Package harness is what the load generator (tools/bench) and the fault
// harness (tools/chaos) add to internal/testkit: a private PostgreSQL
// cluster, on a free loopback port, that may be crashed and started again,
// or given a streaming standby (through a Link, a TCP proxy the harness can
// stall) that is promoted once the primary's machine is killed; and latency
// samples printed as percentiles. The project's binaries and the private
// redis-server come from testkit, as in the tests.
//
// Nothing here is a test double: the processes are the ones a deployment
// runs, and killing one is a real SIGKILL.
package harness

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/idemkeys/payments/internal/testkit"
)

// PostgresBinaries is where Debian and Ubuntu install PostgreSQL's server programs,
// which are not on PATH there.
const PostgresBinaries = "/usr/lib/postgresql/*/bin"

// Available reports whether the programs StartPostgres, StartStandby and
// testkit.RunRedis run are installed.
func Available() error {
	for _, name := range []string{"initdb", "postgres", "psql", "pg_basebackup"} {
		if _, err := testkit.LookPath(name, PostgresBinaries); err != nil {
			return err
		}
	}
	_, err := testkit.LookPath("redis-server")
	return err
}

// Postgres is a private PostgreSQL cluster in a folder of its own, on a free
// loopback port, with trust authentication for the user postgres. It skips
// fsync, as a disposable test bed may, and can be crashed
// (Crash: SIGQUIT, the "immediate" shutdown, as after a power cut of the
// server process) and started again.
type Postgres struct {
	*testkit.Process
	port int
	dir  string

	mu sync.Mutex
	db *sql.DB // to the database postgres, opened by conn
}

// StartPostgres creates a cluster in a new temporary folder and starts it;
// Close removes both. When this process runs as root, the cluster runs as
// the user postgres, as PostgreSQL refuses root; the folder is made outside
// any folder private to root for the same reason.
func StartPostgres(log io.Writer) (*Postgres, error) {
	dir, err := os.MkdirTemp("", "harness-pg-")
	if err != nil {
		return nil, err
	}
	pg, err := startPostgres(dir, log)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return pg, nil
}

func startPostgres(dir string, log io.Writer, extra ...string) (*Postgres, error) {
	initdb, err := testkit.LookPath("initdb", PostgresBinaries)
	if err != nil {
		return nil, err
	}
	cred, err := ownedByPostgres(dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "pgdata")
	cmd := exec.CommandContext(context.Background(), initdb, "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	pg, err := newServer(dir, log, extra...)
	if err != nil {
		return nil, err
	}
	if err := pg.Start(60 * time.Second); err != nil {
		return nil, err
	}
	return pg, nil
}

// newServer describes the server of the cluster in dir/pgdata (made by
// initdb or pg_basebackup) on a free loopback port, not yet started. extra
// are more "-c name=value" settings, after (and so over) the defaults.
func newServer(dir string, log io.Writer, extra ...string) (*Postgres, error) {
	server, err := testkit.LookPath("postgres", PostgresBinaries)
	if err != nil {
		return nil, err
	}
	addr, err := testkit.FindFreeAddr()
	if err != nil {
		return nil, err
	}
	_, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	sockets := filepath.Join(dir, "pgsock")
	if err := os.MkdirAll(sockets, 0o755); err != nil {
		return nil, err
	}
	cred, err := ownedByPostgres(sockets)
	if err != nil {
		return nil, err
	}
	args := []string{"-D", filepath.Join(dir, "pgdata"), "-p", portText, "-k", sockets, "-c", "listen_addresses=127.0.0.1",
		// fsync off: the disk is skipped, not durability against a
		// crash of the server process, which is all the harness
		// injects (the operating system keeps what was written).
		// synchronous_commit stays on: with it off a crash loses
		// commits the clients were told about (seen in this
		// package's test).
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=256MB"}
	for _, e := range extra {
		args = append(args, "-c", e)
	}
	pg := &Postgres{port: port, dir: dir}
	pg.Process = &testkit.Process{
		Name:       "postgres",
		Path:       server,
		Args:       args,
		Addr:       addr,
		Log:        log,
		Credential: cred,
		Ready:      func() bool { return pg.ping() == nil },
	}
	return pg, nil
}

// ownedByPostgres gives dir to the user postgres when this process is root
// (postgresCredential), and returns the credential to run its programs
// with: nil when we are not root.
func ownedByPostgres(dir string) (*syscall.Credential, error) {
	cred, err := postgresCredential()
	if err != nil || cred == nil {
		return cred, err
	}
	return cred, os.Chown(dir, int(cred.Uid), int(cred.Gid))
}

// postgresCredential is the credential PostgreSQL's programs run under:
// the user postgres when we are root (initdb and postgres refuse root), nil
// otherwise.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL needs the user postgres: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Close kills the cluster and removes its folder.
func (pg *Postgres) Close() {
	pg.mu.Lock()
	if pg.db != nil {
		_ = pg.db.Close()
	}
	pg.mu.Unlock()
	pg.Kill()
	_ = os.RemoveAll(pg.dir)
}

// conn is a small pool of connections to the database postgres, opened on
// first use and kept until Close, for the calls that must not wait for a
// psql to start (WALPosition, Promote).
func (pg *Postgres) conn() (*sql.DB, error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.db == nil {
		db, err := sql.Open("pgx", pg.URL("postgres"))
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(2)
		pg.db = db
	}
	return pg.db, nil
}

// URL is the cluster's URL for database db.
func (pg *Postgres) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, db)
}

// Port is the port the cluster listens on.
func (pg *Postgres) Port() int { return pg.port }

// ping runs SELECT 1 in the database postgres.
func (pg *Postgres) ping() error {
	return pg.Exec("postgres", "SELECT 1")
}

// Exec runs SQL statements in database db through psql.
func (pg *Postgres) Exec(db, sql string) error {
	_, err := pg.Query(db, sql)
	return err
}

// Query runs SQL statements in database db through psql and returns what
// they printed, unaligned and without headers ("t", "42", "a|b" lines).
func (pg *Postgres) Query(db, sql string) (string, error) {
	psql, err := testkit.LookPath("psql", PostgresBinaries)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", pg.URL(db), "-c", sql)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("psql %q: %w: %s", sql, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// CreateDatabase makes an empty database and returns its URL.
func (pg *Postgres) CreateDatabase(name string) (string, error) {
	if err := pg.Exec("postgres", "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return pg.URL(name), nil
}

// Crash stops the cluster the hard way (SIGQUIT: every backend exits at
// once, the next start replays the write-ahead log).
func (pg *Postgres) Crash() { pg.Signal(syscall.SIGQUIT, 30*time.Second) }
