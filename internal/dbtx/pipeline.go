package dbtx

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// The pipeline is the one place that goes around GORM, and why: an Atomic
// create on PostgreSQL is a transaction of three inserts (the order, its
// outbox event, the idempotency record), and through GORM each statement
// is a round trip of its own, five with BEGIN and COMMIT, each paying the
// builders, database/sql and a write and a read on the socket. The three
// inserts need no answer from the database but their errors (their ids are
// made in Go), so they are deferred until the commit and sent together on
// the connection's pgx underneath database/sql, as one pipeline that
// PostgreSQL runs as one transaction: one round trip instead of five, the
// same statements.
//
// That transaction may commit on its own only because a write whose row
// decides (the idempotency record's insert-if-absent) has a fast form that
// fails, and so rolls the whole back, wherever its slow form would return
// no row or do more (gormstore's FastInsertSQL: the key not plainly free).
// A fast form that fails so costs two more round trips: BEGIN and the
// writes again in their slow forms, which decide, then ROLLBACK or COMMIT.
//
// Only writes whose failure can be nothing but the request's failure may be
// deferred: a write whose failure is an answer (a unique clash told to the
// client as 409) must run at once, with Conn. A statement run with Conn
// flushes what was deferred first, into the transaction it begins. SQLite
// runs every write at once.

// Write is a deferred statement: its SQL with ? placeholders and its
// arguments.
type Write struct {
	Query string
	Args  []any
	// Into, if set, receives the one integer column of the one row the
	// statement returns; no row is NoRow, the write's refusal.
	Into  *int64
	NoRow error
	// Fast, if set, is the form sent in a pipeline that commits by itself
	// (PostgreSQL's $n placeholders, over FastArgs), which fails where
	// Query would return no row or do more; Slow reports whether an error
	// is that failure, and the writes are sent again in a transaction.
	Fast     string
	FastArgs []any
	Slow     func(err error) bool
}

// Exec runs a write whose failure can only be the request's failure (an
// insert of rows whose ids are made in Go): at once, or, inside the lazy
// transaction of an Atomic request on PostgreSQL, deferred and sent with the
// others when the transaction commits. Its error then comes back from the
// commit; it returns nil here.
func Exec(ctx context.Context, db *gorm.DB, query string, args ...any) error {
	if Defer(ctx, Write{Query: query, Args: args}) {
		return nil
	}
	return Conn(ctx, db).Exec(query, args...).Error
}

// Defer queues w in the lazy transaction ctx carries, if that may still
// pipeline (PostgreSQL, nothing begun yet), and reports whether it did.
// Its error, w.NoRow included, then comes back from the commit.
func Defer(ctx context.Context, w Write) bool {
	u, ok := ctx.Value(txKey{}).(*unit)
	return ok && u.deferWrite(w)
}

// flushInto runs the deferred writes one by one in an open transaction (a
// statement came that needs the transaction now).
func (u *unit) flushInto(tx *gorm.DB) error {
	pending := u.pending
	u.pending = nil
	for _, w := range pending {
		if w.Into != nil {
			err := ScanRow(tx.Raw(w.Query, w.Args...), w.Into)
			if errors.Is(err, sql.ErrNoRows) {
				return w.NoRow
			}
			if err != nil {
				return err
			}
			continue
		}
		if err := tx.Exec(w.Query, w.Args...).Error; err != nil {
			return err
		}
	}
	return nil
}

// pipeline sends the deferred writes in one round trip on a pool
// connection's pgx, with no BEGIN or COMMIT: statements pipelined up to one
// Sync run in one implicit transaction, which the Sync commits when all of
// them succeeded and rolls back when one failed (PostgreSQL's protocol
// docs, "Pipelining"). When a fast form fails as its Slow says, it sends
// BEGIN and the writes again in their slow forms, then COMMIT, or ROLLBACK
// after a failure or a refusal.
func (u *unit) pipeline() error {
	pending := u.pending
	u.pending = nil
	return OnPgx(u.ctx, u.db, func(pc *pgx.Conn) error {
		if commitsAlone(pending) {
			err := u.send(pc, pending, true)
			if err == nil || !slow(pending, err) {
				return err
			}
		}
		err := u.send(pc, pending, false)
		end := "COMMIT"
		if err != nil {
			end = "ROLLBACK"
		}
		return finish(u.ctx, pc, end, err)
	})
}

// OnPgx runs fn on the pgx connection under one of db's pool connections,
// for what goes around GORM and database/sql: a pipeline, or a read that
// is on every retry's path.
func OnPgx(ctx context.Context, db *gorm.DB, fn func(*pgx.Conn) error) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("dbtx: needs the pgx driver, got %T", dc)
		}
		return fn(sc.Conn())
	})
}

// commitsAlone reports whether pending may go in a transaction that
// commits by itself: every write whose row decides has its fast form.
func commitsAlone(pending []Write) bool {
	for _, w := range pending {
		if w.Into != nil && w.Fast == "" {
			return false
		}
	}
	return true
}

// Timestamp is t as a statement's argument that pgx encodes as it is,
// where it boxes a time.Time once more on every statement; a database/sql
// driver (SQLite) reads it as the time.Time.
func Timestamp(t time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t, Valid: true} }

// String is s as a statement's argument that costs no allocation when
// passed as a pointer to it (&v), where s itself would be boxed: pgx reads
// it through pgtype.TextValuer, a database/sql driver (SQLite) through
// driver.Valuer. Not for a JSON column: pgx would encode it as a JSON
// string, where it sends a plain string as the JSON text it holds.
func String(s string) pgtype.Text { return pgtype.Text{String: s, Valid: true} }

// slow reports whether err is a fast form's failure that the slow forms
// decide.
func slow(pending []Write, err error) bool {
	for _, w := range pending {
		if w.Slow != nil && w.Slow(err) {
			return true
		}
	}
	return false
}

// send queues the writes on one batch and reads their answers: when fast,
// in their fast forms, in the batch's implicit transaction; else after a
// BEGIN, leaving the transaction open.
func (u *unit) send(pc *pgx.Conn, pending []Write, fast bool) error {
	batch := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(pending)+1)} // sized: no growing on the way
	if !fast {
		batch.Queue("BEGIN")
	}
	for _, w := range pending {
		if fast && w.Fast != "" {
			batch.Queue(w.Fast, w.FastArgs...)
			continue
		}
		batch.Queue(Dollars(w.Query), w.Args...)
	}
	results := pc.SendBatch(u.ctx, batch)
	var err error
	if !fast {
		_, err = results.Exec()
	}
	for _, w := range pending {
		if err != nil {
			break
		}
		if w.Into != nil {
			if err = results.QueryRow().Scan(w.Into); errors.Is(err, pgx.ErrNoRows) {
				err = w.NoRow
			}
			continue
		}
		_, err = results.Exec()
	}
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	return err
}

// finish sends end (COMMIT or ROLLBACK) and returns err, the batch's. An
// end that fails leaves the connection in an unknown state: database/sql
// must not hand it out again.
func finish(ctx context.Context, pc *pgx.Conn, end string, err error) error {
	if _, endErr := pc.Exec(ctx, end); endErr != nil {
		if err == nil {
			err = endErr
		}
		return errors.Join(err, driver.ErrBadConn)
	}
	return err
}

// Dollars rewrites the ? placeholders of a statement as PostgreSQL's $n,
// once per statement: the deferred statements are the stores' own
// constants, with no ? inside a literal.
func Dollars(query string) string {
	if q, ok := numbered.Load(query); ok {
		return q.(string)
	}
	var sb strings.Builder
	sb.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			sb.WriteByte('$')
			sb.WriteString(strconv.Itoa(n))
			continue
		}
		sb.WriteByte(query[i])
	}
	q, _ := numbered.LoadOrStore(query, sb.String())
	return q.(string)
}

// numbered holds Dollars' rewrites by statement.
var numbered sync.Map
