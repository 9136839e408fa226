// Package dbtx is the one way this program opens a database transaction:
// it travels in the context, so that whoever owns it (the idempotency
// Keeper, a service) never hands a *gorm.DB to a handler, and every store
// joins it the same way, with Conn. Transaction begins at once; Lazy
// begins at the first statement and, on PostgreSQL, may send its deferred
// writes (Exec, Defer) in one pipeline at the commit (pipeline.go).
package dbtx

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"gorm.io/gorm"
)

type txKey struct{}

// unit is a transaction carried by a context. A lazy one (Lazy) begins at
// the first Conn; one of Transaction has begun already.
type unit struct {
	mu  sync.Mutex
	ctx context.Context
	db  *gorm.DB // the handle to begin on, bound to ctx when it begins
	tx  *gorm.DB // nil until begun
	err error    // the begin's error, if it failed
	// pipelined: writes may be deferred (Exec) and sent together at the
	// commit (PostgreSQL only); pending holds them until then.
	pipelined bool
	pending   []Write
	// few is pending's first array: a create defers three writes.
	few [4]Write
	// after runs once the transaction has committed (AfterCommit).
	after []func()
}

// conn returns the unit's transaction, beginning it on first use. A begin
// that fails returns a handle carrying the error, so the caller's statement
// fails with it and runs nothing. Writes deferred until now go first, so
// that the caller's statement sees them.
func (u *unit) conn() *gorm.DB {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tx == nil {
		u.tx = u.db.WithContext(u.ctx).Begin()
		u.err = u.tx.Error
	}
	if len(u.pending) > 0 && u.err == nil {
		u.err = u.flushInto(u.tx)
	}
	if u.err != nil && u.tx.Error == nil {
		_ = u.tx.AddError(u.err)
	}
	return u.tx
}

// deferWrite queues w if the unit may still pipeline: nothing has begun
// the transaction yet. It reports whether it did.
func (u *unit) deferWrite(w Write) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.pipelined || u.tx != nil {
		return false
	}
	u.pending = append(u.pending, w)
	return true
}

// end commits or rolls back whatever began, sending the deferred writes
// first on a commit.
func (u *unit) end(commit bool) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.tx == nil && len(u.pending) > 0 && commit:
		return u.pipeline()
	case u.tx == nil:
		return nil
	case len(u.pending) > 0 && commit && u.err == nil:
		if err := u.flushInto(u.tx); err != nil {
			_ = u.tx.Rollback()
			return err
		}
		return u.tx.Commit().Error
	case u.err != nil:
		return u.err
	case commit:
		return u.tx.Commit().Error
	}
	err := u.tx.Rollback().Error
	if errors.Is(err, sql.ErrTxDone) {
		// The context ended first and database/sql rolled it back.
		return nil
	}
	return err
}

// Conn returns the transaction carried by ctx (beginning it, if it is a
// lazy one and this is its first statement), or db bound to ctx.
func Conn(ctx context.Context, db *gorm.DB) *gorm.DB {
	if u, ok := ctx.Value(txKey{}).(*unit); ok {
		// The transaction's connection, with the caller's context: a
		// statement belongs to the span its caller is in, not to the one
		// that began the transaction.
		return u.conn().WithContext(ctx)
	}
	return db.WithContext(ctx)
}

// Carried reports whether ctx carries a transaction (begun or not).
func Carried(ctx context.Context) bool {
	_, ok := ctx.Value(txKey{}).(*unit)
	return ok
}

// Transaction runs fn in a transaction carried by the context it is given.
// When ctx already carries one, fn joins it: the outer owner commits.
func Transaction(ctx context.Context, db *gorm.DB, fn func(ctx context.Context) error) error {
	if Carried(ctx) {
		return fn(ctx)
	}
	u := &unit{}
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		u.tx = tx
		return fn(context.WithValue(ctx, txKey{}, u))
	})
	if err == nil {
		u.committed()
	}
	return err
}

// AfterCommit runs fn once the transaction ctx carries has committed, and
// never if it rolls back; at once when ctx carries none. The idempotency
// layer publishes a stored answer to its caches this way: only what the
// database holds may be cached.
func AfterCommit(ctx context.Context, fn func()) {
	u, ok := ctx.Value(txKey{}).(*unit)
	if !ok {
		fn()
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.after = append(u.after, fn)
}

// committed runs what waited for the commit.
func (u *unit) committed() {
	u.mu.Lock()
	after := u.after
	u.after = nil
	u.mu.Unlock()
	for _, fn := range after {
		fn()
	}
}

// Lazy runs fn with a context carrying a transaction that begins at its
// first statement, so that what fn does before any statement (decoding and
// validating a body) holds no pool connection; when ctx carries a
// transaction already, fn joins it. On PostgreSQL, writes made with Exec
// or Defer are sent at the commit in one pipeline (pipeline.go). It
// commits when fn returns nil, and rolls back otherwise, or when fn panics
// (the panic goes on up). A deferred write refused at the commit returns
// its Write.NoRow, and nothing commits.
func Lazy(ctx context.Context, db *gorm.DB, fn func(ctx context.Context) error) (err error) {
	if Carried(ctx) {
		return fn(ctx)
	}
	u := &unit{ctx: ctx, db: db, pipelined: db.Name() == "postgres"}
	u.pending = u.few[:0]
	defer func() {
		if p := recover(); p != nil {
			_ = u.end(false)
			panic(p)
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{}, u)); err != nil {
		_ = u.end(false)
		return err
	}
	if err := u.end(true); err != nil {
		return err
	}
	u.committed()
	return nil
}

// ScanRow runs tx's query for one row and scans it into dest, returning
// sql.ErrNoRows when there is none. It stands in for GORM's
// Row().Scan(...): Row returns a nil *sql.Row, which panics on Scan, when
// the statement never ran (a transaction that could not begin because the
// database is away, a failover under way); ScanRow returns that error.
func ScanRow(tx *gorm.DB, dest ...any) error {
	rows, err := tx.Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}
