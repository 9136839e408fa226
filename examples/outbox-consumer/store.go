package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	// The two database/sql drivers: pgx for PostgreSQL, and the pure-Go
	// SQLite that the API embeds too.
	_ "github.com/glebarez/go-sqlite"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// Event is one outbox event as the API publishes it, whatever the broker.
type Event struct {
	ID         string
	Type       string
	MerchantID string
	Payload    []byte
}

// The event type this consumer has an effect for; every other type is
// recorded as processed and otherwise ignored.
const eventPaymentSucceeded = "payment.succeeded"

// paymentSucceeded is the part of a payment.succeeded payload the effect
// reads.
type paymentSucceeded struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// schema is the consumer's own: the effect (a running total of paid amounts
// per merchant and currency) and the record of the events that produced it.
// The two live in one database so that one transaction writes both: an
// event is applied if and only if its id is in processed_events. Both keys
// start with merchant_id, like every table of the API, so this database can
// be sharded the same way.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS processed_events (
		merchant_id  TEXT NOT NULL,
		event_id     TEXT NOT NULL,
		type         TEXT NOT NULL,
		processed_at TIMESTAMP NOT NULL,
		PRIMARY KEY (merchant_id, event_id)
	)`,
	`CREATE TABLE IF NOT EXISTS merchant_paid_totals (
		merchant_id TEXT NOT NULL,
		currency    TEXT NOT NULL,
		paid_amount BIGINT NOT NULL,
		payments    BIGINT NOT NULL,
		PRIMARY KEY (merchant_id, currency)
	)`,
}

// Store is the consumer's database.
type Store struct {
	db *sql.DB
}

// OpenStore opens CONSUMER_DATABASE_URL: "postgres://…" (or
// "postgresql://…") for PostgreSQL, "sqlite:<path>" for an SQLite file, and
// creates the schema if it is missing.
func OpenStore(ctx context.Context, url string) (*Store, error) {
	var db *sql.DB
	var err error
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		db, err = sql.Open("pgx", url)
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(url, "sqlite:")
		if path == "" {
			return nil, errors.New("CONSUMER_DATABASE_URL: sqlite: needs a path, e.g. sqlite:outbox-consumer.db")
		}
		// IMMEDIATE transactions take the write lock at BEGIN, so two
		// transactions never both read and then fail to upgrade; the busy
		// timeout waits for the lock instead of failing at once.
		db, err = sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
		if err == nil {
			db.SetMaxOpenConns(1)
		}
	default:
		return nil, fmt.Errorf("CONSUMER_DATABASE_URL must be postgres://… or sqlite:<path>, got %q", redactURL(url))
	}
	if err != nil {
		return nil, fmt.Errorf("open consumer database: %w", err)
	}
	s := &Store{db: db}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// redactURL keeps a URL's scheme only, so an error never shows a password.
func redactURL(url string) string {
	if scheme, _, ok := strings.Cut(url, "://"); ok {
		return scheme + "://…"
	}
	if len(url) > 12 {
		return url[:12] + "…"
	}
	return url
}

func (s *Store) migrate(ctx context.Context) error {
	for _, stmt := range schema {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create consumer schema: %w", err)
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// ErrBadEvent says an event cannot be applied as it is (a payload that does
// not decode, an amount that is not positive): applying it again will not
// help, so the consumer leaves it unacknowledged for a person to look at
// (a real consumer would move it to a dead-letter table).
var ErrBadEvent = errors.New("bad event")

// Apply records e as processed and applies its effect in one transaction.
// The id goes in first: if it is there already the event was applied
// before (by this process before a crash, or by another consumer that got
// the same entry), and Apply commits nothing and returns false. Once Apply
// has returned true the effect is committed and the message may be
// acknowledged; if the process dies before the acknowledgement, the broker
// delivers the message again and Apply returns false.
//
// Errors: ErrBadEvent (wrapped) for an event that can never apply; any
// other error is the database's, and the event may be tried again.
func (s *Store) Apply(ctx context.Context, e Event) (applied bool, err error) {
	var pay paymentSucceeded
	if e.Type == eventPaymentSucceeded {
		// Decoded before the transaction: a bad payload touches nothing.
		if err := json.Unmarshal(e.Payload, &pay); err != nil {
			return false, fmt.Errorf("%w: %s %s: payload: %w", ErrBadEvent, e.Type, e.ID, err)
		}
		if pay.Amount <= 0 || pay.Currency == "" {
			return false, fmt.Errorf("%w: %s %s: amount %d %q", ErrBadEvent, e.Type, e.ID, pay.Amount, pay.Currency)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	// ON CONFLICT DO NOTHING rather than catching a unique violation: on
	// PostgreSQL a failed statement aborts the whole transaction, and a
	// concurrent insert of the same id waits here for the other
	// transaction and then finds its row.
	res, err := tx.ExecContext(ctx,
		`INSERT INTO processed_events (merchant_id, event_id, type, processed_at) VALUES ($1, $2, $3, $4)
		 ON CONFLICT (merchant_id, event_id) DO NOTHING`,
		e.MerchantID, e.ID, e.Type, time.Now().UTC())
	if err != nil {
		return false, fmt.Errorf("record event %s: %w", e.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("record event %s: %w", e.ID, err)
	} else if n == 0 {
		return false, nil // applied before; the rollback keeps nothing
	}
	if e.Type == eventPaymentSucceeded {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO merchant_paid_totals (merchant_id, currency, paid_amount, payments) VALUES ($1, $2, $3, 1)
			 ON CONFLICT (merchant_id, currency) DO UPDATE SET
			   paid_amount = merchant_paid_totals.paid_amount + excluded.paid_amount,
			   payments    = merchant_paid_totals.payments + 1`,
			e.MerchantID, pay.Currency, pay.Amount); err != nil {
			return false, fmt.Errorf("apply %s: %w", e.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit %s: %w", e.ID, err)
	}
	return true, nil
}
