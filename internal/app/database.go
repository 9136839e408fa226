package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/tracing"
	"github.com/idemkeys/payments/migrations"
)

// openDatabase connects, retrying with backoff for DB_CONNECT_TIMEOUT (the
// database may start after us), and applies the migrations. tr (nil: off)
// traces the statements.
func openDatabase(ctx context.Context, cfg config.Config, log *slog.Logger, tr *tracing.Tracing) (*database.DB, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.DBConnectTimeout)
	defer cancel()
	db, err := connectDatabase(ctx, cfg.DatabaseURL, database.Options{
		SQLitePath: cfg.SQLitePath, MaxOpenConns: cfg.DBMaxConns, Tracing: databaseTracing(tr),
		LockTimeout: cfg.DBLockTimeout, IdleInTransactionTimeout: cfg.DBIdleInTransactionTimeout,
	}, cfg.DBConnectTimeout, log)
	if err != nil {
		return nil, err
	}
	if lock, idle, err := db.Settings(ctx); err == nil && db.Dialect == database.Postgres && (lock == 0 || idle == 0) {
		// Behind PgBouncer the start-up settings are ignored: the role's
		// (or database's) must be set instead (docs/guide/operations.md).
		log.Warn("database: row-lock waits are not bounded; one frozen instance can stall others",
			"lock_timeout", lock.String(), "idle_in_transaction_session_timeout", idle.String(),
			"fix", "set DB_LOCK_TIMEOUT and DB_IDLE_IN_TRANSACTION_TIMEOUT, or behind PgBouncer the role's lock_timeout and idle_in_transaction_session_timeout")
	}
	applied, err := migrate(ctx, cfg, db, log)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	log.Info("database ready", "dialect", string(db.Dialect), "migrations_applied", applied)
	return db, nil
}

// migrate applies the pending migrations over db, or, when
// MIGRATE_DATABASE_URL is set, over a connection of their own to that URL:
// the server itself, when DATABASE_URL goes through a pooler in
// transaction mode (PgBouncer). goose holds a session advisory lock for the
// whole run, so that one of several instances starting at once migrates
// while the others wait; behind a transaction pooler the lock would be
// taken on one server connection and released (or not) on another, and
// the DDL would run wherever the pooler sends it.
func migrate(ctx context.Context, cfg config.Config, db *database.DB, log *slog.Logger) (int, error) {
	target := db
	if cfg.MigrateDatabaseURL != "" {
		direct, err := connectDatabase(ctx, cfg.MigrateDatabaseURL, database.Options{MaxOpenConns: 2}, cfg.DBConnectTimeout, log)
		if err != nil {
			return 0, fmt.Errorf("MIGRATE_DATABASE_URL: %w", err)
		}
		defer direct.Close()
		target = direct
	}
	sqlDB, err := target.DB.DB()
	if err != nil {
		return 0, err
	}
	return migrations.Up(ctx, sqlDB, string(target.Dialect))
}

// connectDatabase opens url and pings it, retrying with exponential
// backoff until ctx ends (the database may start after us), then says why
// it gave up; limit is ctx's time, for that message.
func connectDatabase(ctx context.Context, url string, opts database.Options, limit time.Duration, log *slog.Logger) (*database.DB, error) {
	connect := func() (*database.DB, error) {
		db, err := database.Open(url, opts)
		if err != nil {
			if errors.Is(err, database.ErrUnavailable) {
				return nil, err
			}
			return nil, backoff.Permanent(err)
		}
		if err := db.Ping(ctx); err != nil {
			_ = db.Close()
			return nil, err
		}
		return db, nil
	}
	b := backoff.NewExponentialBackOff()
	b.MaxInterval = 2 * time.Second
	var cause error
	for {
		db, err := connect()
		if err == nil {
			return db, nil
		}
		// Keep the most telling reason: the attempt cut short by the
		// deadline only says "deadline exceeded".
		if cause == nil || !errors.Is(err, context.DeadlineExceeded) {
			cause = err
		}
		var permanent *backoff.PermanentError
		if errors.As(err, &permanent) {
			return nil, fmt.Errorf("database: %w", permanent.Unwrap())
		}
		wait := b.NextBackOff()
		deadline, _ := ctx.Deadline()
		if left := time.Until(deadline); left <= 0 {
			return nil, fmt.Errorf("database unreachable after %s: %w", limit, cause)
		} else if wait > left {
			wait = left
		}
		log.Warn("database not reachable yet; retrying", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("database unreachable after %s: %w", limit, cause)
			}
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// Migrate applies the migrations to the configured database and says which
// schema version it is at.
func Migrate(ctx context.Context, cfg config.Config, log *slog.Logger, stdout io.Writer) error {
	db, err := openDatabase(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(stdout, "migrations applied; schema version %d (%s)\n", mustVersion(ctx, db), db.Dialect)
	return nil
}

func mustVersion(ctx context.Context, db *database.DB) int64 {
	sqlDB, err := db.DB.DB()
	if err != nil {
		return -1
	}
	v, err := migrations.Version(ctx, sqlDB, string(db.Dialect))
	if err != nil {
		return -1
	}
	return v
}

// CreateMerchant creates a merchant in the configured database and prints
// its API key, which is shown this once (only its hash is stored).
func CreateMerchant(ctx context.Context, cfg config.Config, log *slog.Logger, name string, stdout io.Writer) error {
	if name == "" {
		return errors.New("create-merchant: -name is required")
	}
	db, err := openDatabase(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	m, key, err := merchants.NewStore(db.DB, time.Now).Create(ctx, name)
	if err != nil {
		return fmt.Errorf("create-merchant: %w", err)
	}
	fmt.Fprintf(stdout, "merchant %s (%s) created\nAPI key, shown once: %s\n", m.ID, m.Name, key)
	return nil
}
