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
	connect := func() (*database.DB, error) {
		db, err := database.Open(cfg.DatabaseURL, database.Options{
			SQLitePath: cfg.SQLitePath, MaxOpenConns: cfg.DBMaxConns, Tracing: databaseTracing(tr),
		})
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
	// Retry with exponential backoff until the whole DB_CONNECT_TIMEOUT is
	// spent (the database may start after us), then say why we gave up.
	b := backoff.NewExponentialBackOff()
	b.MaxInterval = 2 * time.Second
	var db *database.DB
	var err, cause error
	for {
		if db, err = connect(); err == nil {
			break
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
			return nil, fmt.Errorf("database unreachable after %s: %w", cfg.DBConnectTimeout, cause)
		} else if wait > left {
			wait = left
		}
		log.Warn("database not reachable yet; retrying", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("database unreachable after %s: %w", cfg.DBConnectTimeout, cause)
			}
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	sqlDB, err := db.DB.DB()
	if err != nil {
		return nil, err
	}
	applied, err := migrations.Up(ctx, sqlDB, string(db.Dialect))
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	log.Info("database ready", "dialect", string(db.Dialect), "migrations_applied", applied)
	return db, nil
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
