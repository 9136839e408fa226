package gormstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/idempotency"
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
// That transaction may commit on its own only because the record goes in
// by an insert there (FastInsertSQL) that fails, and so rolls the whole
// back, whenever the key is not plainly free: a row under it, live or
// expired, or a live tombstone. The request read the key's record before
// its handler ran (idempotency.Keeper), so that happens only when another
// request took the key in between, or its record had expired. A refusal
// then costs two more round trips: BEGIN and the writes again with the
// store's insert-if-absent, which decides (a live record: ErrKeyExists; an
// expired one: replaced), then ROLLBACK or COMMIT.
//
// Only writes whose failure can be nothing but the request's failure may be
// deferred: a write whose failure is an answer (a unique clash told to the
// client as 409) must run at once, with Conn. A statement run with Conn
// flushes what was deferred first, into the transaction it begins. SQLite
// runs every write at once.

// pendingWrite is a deferred statement: its SQL with ? placeholders and
// its arguments. When into is set the statement returns one row of one
// integer column, and no row means the key is taken (the record's insert).
type pendingWrite struct {
	query string
	args  []any
	into  *int64
	// fast, for the record's insert, is the plain insert (PostgreSQL's $n
	// placeholders, over fastArgs: the first of args) that fails where
	// query would return no row or replace an expired one.
	fast     string
	fastArgs []any
}

// Exec runs a write whose failure can only be the request's failure (an
// insert of rows whose ids are made in Go): at once, or, inside the lazy
// transaction of an Atomic request on PostgreSQL, deferred and sent with the
// others when the transaction commits. Its error then comes back from the
// commit; it returns nil here.
func Exec(ctx context.Context, db *gorm.DB, query string, args ...any) error {
	if u, ok := ctx.Value(txKey{}).(*unit); ok && u.deferWrite(pendingWrite{query: query, args: args}) {
		return nil
	}
	return Conn(ctx, db).Exec(query, args...).Error
}

// flushInto runs the deferred writes one by one in an open transaction (a
// statement came that needs the transaction now).
func (u *unit) flushInto(tx *gorm.DB) error {
	pending := u.pending
	u.pending = nil
	for _, w := range pending {
		if w.into != nil {
			err := ScanRow(tx.Raw(w.query, w.args...), w.into)
			if errors.Is(err, sql.ErrNoRows) {
				return idempotency.ErrKeyExists
			}
			if err != nil {
				return err
			}
			continue
		}
		if err := tx.Exec(w.query, w.args...).Error; err != nil {
			return err
		}
	}
	return nil
}

// pipeline sends the deferred writes in one round trip on a pool
// connection's pgx, with no BEGIN or COMMIT: statements pipelined up to one
// Sync run in one implicit transaction, which the Sync commits when all of
// them succeeded and rolls back when one failed (PostgreSQL's protocol
// docs, "Pipelining"). When the record's plain insert fails on its own
// table (the key not plainly free), it sends BEGIN and the writes again
// with the insert-if-absent, then COMMIT, or ROLLBACK after a failure or a
// refused record.
func (u *unit) pipeline() error {
	pending := u.pending
	u.pending = nil
	return onPgx(u.ctx, u.db, func(pc *pgx.Conn) error {
		if commitsAlone(pending) {
			err := u.send(pc, pending, true)
			if !keyNotPlainlyFree(err) {
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

// onPgx runs fn on the pgx connection under one of db's pool connections,
// for what goes around GORM and database/sql: a pipeline, or a read that
// is on every retry's path.
func onPgx(ctx context.Context, db *gorm.DB, fn func(*pgx.Conn) error) error {
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
			return fmt.Errorf("gormstore: needs the pgx driver, got %T", dc)
		}
		return fn(sc.Conn())
	})
}

// commitsAlone reports whether pending may go in a transaction that
// commits by itself: every write whose row decides (the record's) has its
// plain form, which fails rather than return no row.
func commitsAlone(pending []pendingWrite) bool {
	for _, w := range pending {
		if w.into != nil && w.fast == "" {
			return false
		}
	}
	return true
}

// send queues the writes on one batch and reads their answers: when fast,
// the record's by its plain insert, in the batch's implicit transaction;
// else after a BEGIN, leaving the transaction open.
func (u *unit) send(pc *pgx.Conn, pending []pendingWrite, fast bool) error {
	batch := &pgx.Batch{}
	if !fast {
		batch.Queue("BEGIN")
	}
	for _, w := range pending {
		if fast && w.fast != "" {
			batch.Queue(w.fast, w.fastArgs...)
			continue
		}
		batch.Queue(dollars(w.query), w.args...)
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
		if w.into != nil {
			if err = results.QueryRow().Scan(w.into); errors.Is(err, pgx.ErrNoRows) {
				err = idempotency.ErrKeyExists
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

// keyNotPlainlyFree reports whether err is the fast insert's failure: a row
// under the key (FastInsertSQL's keyTaken), or the tombstone's refusal
// (fastInsertTombstoned).
func keyNotPlainlyFree(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == "22P02" && (strings.Contains(pgErr.Message, keyTaken) || strings.Contains(pgErr.Message, tombstoneTaken))
}

// dollars rewrites the ? placeholders of a statement as PostgreSQL's $n,
// once per statement: the deferred statements are this package's and the
// stores' own constants, with no ? inside a literal.
func dollars(query string) string {
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

// numbered holds dollars' rewrites by statement.
var numbered sync.Map
