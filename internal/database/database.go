// Package database opens the store the API runs on (PostgreSQL, or an
// embedded SQLite file when no URL is given), carries a transaction through a
// context so that the layer owning it never hands a *gorm.DB to a handler,
// sorts driver errors into the few kinds the layers above act on, and, given
// a tracer provider, records a span per statement (tracing.go).
package database

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idemkeys/payments/internal/dbtx"
)

// Dialect names the SQL flavour behind a DB.
type Dialect string

// The two dialects the API runs on.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

// DB is a GORM handle together with its dialect.
type DB struct {
	*gorm.DB
	Dialect Dialect
}

// Options tune the connection pool.
type Options struct {
	// SQLitePath is the file used when the URL is empty.
	SQLitePath string
	// MaxOpenConns bounds the pool (PostgreSQL).
	MaxOpenConns int
	// Tracing, when set, records a span per statement inside the traces
	// its tracers are given (see tracing.go); nil traces nothing and
	// installs nothing.
	Tracing trace.TracerProvider
	// LockTimeout bounds every wait of a statement for a row lock, and
	// IdleInTransactionTimeout how long the server keeps a transaction
	// whose client went quiet (a frozen instance) before it ends the
	// session and frees its locks (PostgreSQL: lock_timeout and
	// idle_in_transaction_session_timeout, sent as settings of every
	// connection unless the URL sets them itself). Zero leaves the
	// server's (or the role's) value.
	LockTimeout, IdleInTransactionTimeout time.Duration
}

// Open connects to url: empty means the embedded SQLite file at
// opts.SQLitePath (default ./data/payments.db), "sqlite:<path>" an SQLite
// file at path, postgres:// or postgresql:// PostgreSQL.
func Open(url string, opts Options) (*DB, error) {
	cfg := &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		PrepareStmt:            false,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	switch {
	case url == "", strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		if path == "" {
			path = opts.SQLitePath
		}
		if path == "" {
			path = filepath.Join("data", "payments.db")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("create data folder: %w", err)
		}
		// WAL lets readers run beside the single writer; busy_timeout makes a
		// writer wait for the lock instead of failing with SQLITE_BUSY;
		// _txlock=immediate takes the write lock at BEGIN, so two
		// transactions never deadlock upgrading a read lock.
		dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)" +
			"&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
		g, err := gorm.Open(sqlite.Open(dsn), cfg)
		if err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		sqlDB, err := g.DB()
		if err != nil {
			return nil, err
		}
		// One writer at a time is SQLite's model; a small pool keeps readers
		// concurrent without piling up writers on the busy handler.
		sqlDB.SetMaxOpenConns(4)
		if opts.Tracing != nil {
			if err := traceGORM(g, opts.Tracing); err != nil {
				_ = sqlDB.Close()
				return nil, fmt.Errorf("trace sqlite statements: %w", err)
			}
		}
		return &DB{DB: g, Dialect: SQLite}, nil
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		pc := postgres.Config{DSN: url}
		pc.OptionOpenDB = append(pc.OptionOpenDB, stdlib.OptionBeforeConnect(func(_ context.Context, c *pgx.ConnConfig) error {
			if opts.Tracing != nil {
				// Every connection the pool opens carries the tracer.
				c.Tracer = pgxTracing(opts.Tracing, c.Host, c.Port)
			}
			setting(c, "lock_timeout", opts.LockTimeout)
			setting(c, "idle_in_transaction_session_timeout", opts.IdleInTransactionTimeout)
			LetFinish(c)
			return nil
		}))
		g, err := gorm.Open(postgres.New(pc), cfg)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", Classify(err))
		}
		sqlDB, err := g.DB()
		if err != nil {
			return nil, err
		}
		maxOpen := opts.MaxOpenConns
		if maxOpen <= 0 {
			maxOpen = 20
		}
		sqlDB.SetMaxOpenConns(maxOpen)
		sqlDB.SetMaxIdleConns(maxOpen)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
		return &DB{DB: g, Dialect: Postgres}, nil
	default:
		return nil, errors.New("DATABASE_URL must be empty (embedded SQLite), sqlite:<path> or postgres://<host>/<db>")
	}
}

// LetFinish makes c's connections let a statement whose context ends while
// it runs (a client that hung up, a worker stopped at shutdown) finish for
// up to cancelGrace: pgx's default gives up on the socket at once and sends
// a cancel request, which PostgreSQL logs as an ERROR, and the pool loses
// the connection.
func LetFinish(c *pgx.ConnConfig) {
	c.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn(), DeadlineDelay: cancelGrace}
	}
}

// cancelGrace is how long a statement whose context ended may still run
// before pgx closes its connection (and PostgreSQL logs it canceled).
const cancelGrace = 2 * time.Second

// setting makes a positive d the value of the server setting name on the
// connection (in milliseconds, sent at its start), unless the URL set it.
func setting(c *pgx.ConnConfig, name string, d time.Duration) {
	if d <= 0 || c.RuntimeParams[name] != "" {
		return
	}
	if c.RuntimeParams == nil {
		c.RuntimeParams = map[string]string{}
	}
	c.RuntimeParams[name] = strconv.FormatInt(max(d.Milliseconds(), 1), 10)
}

// Settings reads the lock and idle-in-transaction bounds the server
// applies to the pool's connections (zero: none), for the start's check
// that they are in force; SQLite has neither and answers zero.
func (db *DB) Settings(ctx context.Context) (lockTimeout, idleInTransaction time.Duration, err error) {
	if db.Dialect != Postgres {
		return 0, 0, nil
	}
	var lock, idle string
	err = db.WithContext(ctx).Raw(`SELECT current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout')`).
		Row().Scan(&lock, &idle)
	if err != nil {
		return 0, 0, Classify(err)
	}
	return pgDuration(lock), pgDuration(idle), nil
}

// pgDuration reads a duration setting as PostgreSQL shows it ("0",
// "5s", "1500ms", "2min", "1h", "1d").
func pgDuration(s string) time.Duration {
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"min", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			if v, err := strconv.ParseInt(n, 10, 64); err == nil {
				return time.Duration(v) * u.unit
			}
		}
	}
	v, _ := strconv.ParseInt(s, 10, 64) // a bare number is milliseconds
	return time.Duration(v) * time.Millisecond
}

// Ping checks that the database answers within ctx.
func (db *DB) Ping(ctx context.Context) error {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return err
	}
	return Classify(sqlDB.PingContext(ctx))
}

// Close releases the pool.
func (db *DB) Close() error {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Exec is dbtx.Exec, its error classified: a write whose failure can only
// be the request's failure (an insert of rows whose ids are made in Go),
// which inside an Atomic request's transaction on PostgreSQL is deferred
// and sent with the idempotency record in one pipeline at the commit. A
// write whose failure is an answer (a unique clash) must use dbtx.Conn.
func Exec(ctx context.Context, db *gorm.DB, query string, args ...any) error {
	return Classify(dbtx.Exec(ctx, db, query, args...))
}

// Transaction is dbtx.Transaction, its error classified.
func Transaction(ctx context.Context, db *gorm.DB, fn func(ctx context.Context) error) error {
	return Classify(dbtx.Transaction(ctx, db, fn))
}

// ErrUnavailable marks an error as "the database could not be reached or
// dropped the connection": nothing was done, and the request may be retried.
var ErrUnavailable = errors.New("database unavailable")

// ErrBusy marks an error as "a row this statement needs is held by another
// transaction, longer than the lock timeout" (Options.LockTimeout): the
// statement, and its transaction, did nothing; the request may be retried
// once the holder is done (or its session is ended for it).
var ErrBusy = errors.New("database row held by another transaction")

// Classify wraps connection-level failures with ErrUnavailable and a lock
// wait that ran out with ErrBusy, and leaves every other error as it is.
func Classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBusy) {
		return err
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "55P03" {
		// lock_not_available: lock_timeout ran out, or a NOWAIT lock.
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if isConnectionError(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

func isConnectionError(err error) bool {
	// A failure while a new pool connection is opened arrives as a
	// ConnectError, whatever the server said: the database is unreachable
	// or refusing connections (ALLOW_CONNECTIONS false is 55000, a server
	// starting or shutting down 57P03, a full server 53300), and no
	// statement ran.
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is "connection exception", 57P "operator intervention"
		// (a session terminated, shutdown, crash recovery), 53300 "too many
		// connections", 25P03 a session the server ended because its
		// transaction sat idle past idle_in_transaction_session_timeout (a
		// frozen instance, thawed): the server did not do the work.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300" || pgErr.Code == "25P03"
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded), pgconn.SafeToRetry(err):
		return true
	}
	// SQLite reports a writer that waited out busy_timeout only by message;
	// the code is SQLITE_BUSY (5), which the driver folds into its text.
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY") ||
		strings.Contains(msg, "sql: database is closed") || strings.Contains(msg, "conn closed") ||
		strings.Contains(msg, "unable to open database file")
}

// IsUniqueViolation reports whether err is a unique-constraint clash.
func IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}
