// Package gormstore is the idempotency Store on GORM, for PostgreSQL and
// SQLite, and the Transactor of Atomic requests and outside calls (dbtx's
// lazy transaction, which the application's own stores join with
// dbtx.Conn). Its schema is embedded (Schema) for a service that starts
// fresh.
package gormstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/seal"
)

// Store is the idempotency.Store and janitor.Store on PostgreSQL or
// SQLite. The SQL is written out rather than left to GORM's builders
// because each statement is a decision: the insert-if-absent that reserves
// a key, and the fenced updates that only the owner may make.
type Store struct {
	db *gorm.DB
	// cipher, when set, encrypts stored response bodies (WithCipher).
	cipher *seal.Cipher
	// classify sorts the driver's errors (WithClassify).
	classify func(error) error
	// tombstoneTTL, when positive, is how long a purged record's tombstone
	// is kept after the record expired (WithTombstones).
	tombstoneTTL time.Duration
	// insertQuery is insertSQL, or its tombstone-guarded form; fastInsert
	// is FastInsertSQL, or its tombstone-guarded form; getQuery and
	// getDollars are getSQL, or the form that reads tombstones too.
	insertQuery, fastInsert, getQuery, getDollars string
}

var (
	_ idempotency.Store      = (*Store)(nil)
	_ idempotency.Transactor = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithCipher makes the store encrypt the response bodies it writes with c,
// and decrypt them on read. Records written in clear before (no key id)
// still read. nil leaves bodies in clear, as without the option; a record
// that was encrypted then fails to read with seal.ErrKeyUnknown.
func WithCipher(c *seal.Cipher) Option {
	return func(s *Store) { s.cipher = c }
}

// WithClassify passes every error of the driver through classify before it
// is returned (the application's way to mark a lost database, so that it is
// answered 503). The store's own errors (idempotency.ErrKeyExists,
// idempotency.ErrNotFound, idempotency.ErrFenced) never go through it.
func WithClassify(classify func(error) error) Option {
	return func(s *Store) { s.classify = classify }
}

// New returns a Store over db, whose schema holds the idempotency_records
// table (Schema, or the application's migrations).
func New(db *gorm.DB, opts ...Option) *Store {
	s := &Store{db: db, classify: func(err error) error { return err }}
	for _, o := range opts {
		o(s)
	}
	s.insertQuery, s.fastInsert, s.getQuery = insertSQL, FastInsertSQL, getSQL
	if s.tombstoneTTL > 0 {
		s.insertQuery, s.fastInsert, s.getQuery = s.insertTombstoned(), fastInsertTombstoned, getTombstonedSQL
	}
	s.getDollars = dbtx.Dollars(s.getQuery)
	return s
}

// recordRow is the table row; it never leaves this file.
type recordRow struct {
	MerchantID      string
	IdempotencyKey  string
	Method          string
	Path            string
	Fingerprint     string
	State           string
	RecoveryPoint   string
	Fence           int64
	LockedUntil     time.Time
	ResponseStatus  *int
	ResponseHeaders *string
	ResponseBody    []byte
	ResponseKeyID   *string // the key ResponseBody is encrypted with; nil: in clear
	CreatedAt       time.Time
	UpdatedAt       time.Time
	ExpiresAt       time.Time
	RequestDigest   digest // idempotency.Record.Sent; zero when NULL
}

func (recordRow) TableName() string { return "idempotency_records" }

// insertSQL reserves a key: a new row, or the replacement of an expired one
// (an expired record counts as absent). A live row makes the statement a
// no-op that returns nothing, so the unique primary key, not a prior read,
// decides who owns the key. The fence keeps growing across the key's
// records, so the owner of an expired record can never write into its
// successor: a new record's fence is its creation time in microseconds
// (idempotency.FirstFence), above any fence of a record created before it,
// even one the janitor deleted, and a replacement goes past the old
// record's fence if that is higher.
//
// It is exported only so that the benchmark can run this very statement straight
// through pgx, as the database's own limit; nothing else should use it.
const insertSQL = `
INSERT INTO idempotency_records AS r (
    merchant_id, idempotency_key, method, path, fingerprint, state, recovery_point,
    fence, locked_until, response_status, response_headers, response_body, response_key_id,
    created_at, updated_at, expires_at, request_digest)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (merchant_id, idempotency_key) DO UPDATE SET
    method = excluded.method, path = excluded.path, fingerprint = excluded.fingerprint,
    state = excluded.state, recovery_point = excluded.recovery_point,
    fence = CASE WHEN r.fence < excluded.fence THEN excluded.fence ELSE r.fence + 1 END,
    locked_until = excluded.locked_until,
    response_status = excluded.response_status, response_headers = excluded.response_headers,
    response_body = excluded.response_body, response_key_id = excluded.response_key_id,
    created_at = excluded.created_at,
    updated_at = excluded.updated_at, expires_at = excluded.expires_at, request_digest = excluded.request_digest
WHERE r.expires_at <= excluded.created_at
RETURNING fence`

// FastInsertSQL is insertSQL for the commit's pipeline on PostgreSQL
// (dbtx's pipeline), whose transaction commits in the same round trip: the
// same arguments, numbered. Where insertSQL would insert into a free key it
// inserts the same row; where insertSQL would return nothing or replace an
// expired record (a key taken by a request that raced this one past its
// read), it fails, which rolls the transaction back and sends the pipeline
// back to insertSQL. It fails by casting keyTaken to a number, not on the
// primary key: PostgreSQL would log a unique violation with the whole key
// in its detail, and no statement of ours may put a key in the server's
// log. The cast hangs on random() so that the planner cannot compute it
// ahead (a constant would fail always), and COALESCE evaluates it only
// when the insert returned no row. Exported for the benchmark, as
// insertSQL is.
const FastInsertSQL = `
WITH inserted AS (
INSERT INTO idempotency_records (
    merchant_id, idempotency_key, method, path, fingerprint, state, recovery_point,
    fence, locked_until, response_status, response_headers, response_body, response_key_id,
    created_at, updated_at, expires_at, request_digest)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
ON CONFLICT DO NOTHING
RETURNING fence)
SELECT coalesce((SELECT fence FROM inserted), ('` + keyTaken + `' || left(random()::text, 0))::bigint)`

// keyTaken is the text FastInsertSQL fails with: no key in it.
const keyTaken = "the idempotency key is taken"

// keyNotPlainlyFree reports whether err is the fast insert's failure: a row
// under the key (keyTaken), or a live tombstone (tombstoneTaken). The
// pipeline then sends the writes again with the insert-if-absent, which
// decides.
func keyNotPlainlyFree(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == "22P02" && (strings.Contains(pgErr.Message, keyTaken) || strings.Contains(pgErr.Message, tombstoneTaken))
}

// insertArgs holds the values of one Insert, whose arguments point into
// it: pgx and database/sql read a pointer's value, and each value put in
// an any by itself costs an allocation (fourteen of a create's). The times
// are pgtype's, which pgx encodes without boxing them again (a
// database/sql driver reads them as time.Time). Nothing writes them once
// the statement is deferred to the commit.
type insertArgs struct {
	scope, key, method, path, fingerprint, state, point pgtype.Text
	fence                                               int64
	lockedUntil, created, updated, expires, oldest      pgtype.Timestamptz
	body                                                bytesArg
	sent                                                digest
	list                                                [21]any
}

// bytesArg is a bytea argument (nil: NULL) that pgx encodes through its
// pointer (pgtype.BytesValuer), where a *[]byte costs it an allocation (it
// dereferences the pointer by reflection); database/sql reads its Value.
type bytesArg []byte

// BytesValue implements pgtype.BytesValuer.
func (b *bytesArg) BytesValue() ([]byte, error) { return *b, nil }

// Value implements driver.Valuer.
func (b bytesArg) Value() (driver.Value, error) { return []byte(b), nil }

// Insert implements idempotency.Store.
func (s *Store) Insert(ctx context.Context, rec *idempotency.Record) error {
	status, headers, body, keyID, err := s.encodeAnswer(rec.Scope, rec.Key, rec.Answer)
	if err != nil {
		return err
	}
	// One array for both forms: the tombstones' four more arguments
	// follow FastInsertSQL's seventeen. They point into a, as insertArgs
	// tells.
	a := &insertArgs{scope: dbtx.String(rec.Scope), key: dbtx.String(rec.Key), method: dbtx.String(rec.Method),
		path: dbtx.String(rec.Path), fingerprint: dbtx.String(rec.Fingerprint), state: dbtx.String(string(rec.State)),
		point: dbtx.String(rec.Point), fence: idempotency.FirstFence(rec.CreatedAt), body: body,
		lockedUntil: dbtx.Timestamp(rec.LockedUntil), created: dbtx.Timestamp(rec.CreatedAt),
		updated: dbtx.Timestamp(rec.UpdatedAt), expires: dbtx.Timestamp(rec.ExpiresAt), sent: digest(rec.Sent)}
	args := append(a.list[:0], &a.scope, &a.key, &a.method, &a.path, &a.fingerprint, &a.state, &a.point,
		&a.fence, &a.lockedUntil, status, headers, &a.body, keyID, &a.created, &a.updated, &a.expires, &a.sent)
	fastArgs := args // FastInsertSQL's, which the tombstones' form shares
	if s.tombstoneTTL > 0 {
		a.oldest = dbtx.Timestamp(rec.CreatedAt.Add(-s.tombstoneTTL))
		args = append(args, &a.scope, &a.key, &a.created, &a.oldest)
	}
	// In an Atomic request's transaction on PostgreSQL the insert goes in
	// the commit's pipeline (dbtx), and a refusal comes back from the
	// commit as ErrKeyExists.
	if dbtx.Defer(ctx, dbtx.Write{Query: s.insertQuery, Args: args, Into: &rec.Fence, NoRow: idempotency.ErrKeyExists,
		Fast: s.fastInsert, FastArgs: fastArgs, Slow: keyNotPlainlyFree}) {
		return nil
	}
	// Row, not Scan: GORM's Scan records every statement through a logger
	// that spells out the SQL with its values, which cost 5% of the CPU of
	// a whole order creation in a profile (tools/bench).
	var fence int64
	err = dbtx.ScanRow(dbtx.Conn(ctx, s.db).Raw(s.insertQuery, args...), &fence)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// The conflict clause kept a live record: the key is taken.
		return idempotency.ErrKeyExists
	case err != nil:
		return s.classify(err)
	}
	rec.Fence = fence
	return nil
}

// Get implements idempotency.Store.
//
// The read every request makes before it works (a retry on an instance
// that has not seen its key replays with it alone) is written out and
// scanned column by column, where GORM's Find would build the statement and
// fill the row by reflection on every call.
func (s *Store) Get(ctx context.Context, scope, key string, now time.Time) (*idempotency.Record, error) {
	var row recordRow
	// getTombstonedSQL's arguments, pointers into one value as Insert's
	// are; getSQL takes the last three.
	a := &struct {
		scope, key pgtype.Text
		now        pgtype.Timestamptz
		list       [6]any
	}{scope: dbtx.String(scope), key: dbtx.String(key), now: dbtx.Timestamp(now)}
	a.list = [...]any{&a.now, &a.scope, &a.key, &a.scope, &a.key, &a.now}
	args := a.list[3:]
	if s.tombstoneTTL > 0 {
		args = a.list[:]
	}
	var err error
	if s.db.Name() == "postgres" && !dbtx.Carried(ctx) {
		// Every retry that an instance does not hold in memory starts
		// here: straight through pgx, as the pipeline writes, it costs
		// about half of what GORM and database/sql add to one row.
		// (now as a pgtype.Timestamptz, which pgx encodes without the
		// wrapper it makes for a time.Time on every query.)
		err = dbtx.OnPgx(ctx, s.db, func(pc *pgx.Conn) error {
			err := scanPgx(pc.QueryRow(ctx, s.getDollars, args...), &row)
			if errors.Is(err, pgx.ErrNoRows) {
				return sql.ErrNoRows
			}
			return err
		})
	} else {
		err = dbtx.ScanRow(dbtx.Conn(ctx, s.db).Raw(s.getQuery, args...), &row.Method, &row.Path,
			&row.Fingerprint, &row.State, &row.RecoveryPoint, &row.Fence, &row.LockedUntil, &row.ResponseStatus, &row.ResponseHeaders,
			&row.ResponseBody, &row.ResponseKeyID, &row.CreatedAt, &row.UpdatedAt, &row.ExpiresAt, &row.RequestDigest)
	}
	row.MerchantID, row.IdempotencyKey = scope, key
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, idempotency.ErrNotFound
	case err != nil:
		return nil, s.classify(err)
	case row.State == string(idempotency.StateExpired):
		return s.expired(row, now)
	}
	return s.toRecord(row)
}

// scanPgx scans Get's row (getSQL's columns) from pgx. The times and the
// nullable columns go through pgtype's own types, which pgx scans with
// plans it makes without allocating: a *time.Time or a **string costs
// two or three allocations each to plan and fill, on every row, since
// pgx plans the scan of each row a QueryRow returns. What reaches row is
// what scanning into its fields gave: a NULL or infinite time is an
// error, as pgx makes it for a *time.Time.
func scanPgx(r pgx.Row, row *recordRow) error {
	// One value, so that what Scan's pointers make escape is one
	// allocation, not seven.
	var v struct {
		lockedUntil, createdAt, updatedAt, expiresAt pgtype.Timestamptz
		status                                       pgtype.Int4
		headers, keyID                               pgtype.Text
	}
	err := r.Scan(&row.Method, &row.Path, &row.Fingerprint, &row.State, &row.RecoveryPoint,
		&row.Fence, &v.lockedUntil, &v.status, &v.headers, &row.ResponseBody, &v.keyID, &v.createdAt, &v.updatedAt, &v.expiresAt,
		&row.RequestDigest)
	if err != nil {
		return err
	}
	for _, t := range [...]struct {
		from *pgtype.Timestamptz
		to   *time.Time
	}{{&v.lockedUntil, &row.LockedUntil}, {&v.createdAt, &row.CreatedAt}, {&v.updatedAt, &row.UpdatedAt}, {&v.expiresAt, &row.ExpiresAt}} {
		if !t.from.Valid || t.from.InfinityModifier != pgtype.Finite {
			return fmt.Errorf("gormstore: record time %v is not a time", t.from)
		}
		*t.to = t.from.Time
	}
	if v.status.Valid {
		code := int(v.status.Int32)
		row.ResponseStatus = &code
	}
	if v.headers.Valid {
		row.ResponseHeaders = &v.headers.String
	}
	if v.keyID.Valid {
		row.ResponseKeyID = &v.keyID.String
	}
	return nil
}

// getSQL is Get's statement, its columns in recordRow's order from method
// on (the scope and key are Get's own); its arguments scope, key and now.
// Fifteen columns: pgx describes up to sixteen without an allocation.
const getSQL = `SELECT method, path, fingerprint, state, recovery_point,
    fence, locked_until, response_status, response_headers, response_body, response_key_id,
    created_at, updated_at, expires_at, request_digest
FROM idempotency_records WHERE merchant_id = ? AND idempotency_key = ? AND expires_at > ?`

// TakeOver implements idempotency.Store: one statement moves the record
// and returns it as moved, recovery point included, so that no checkpoint
// committed between the caller's read and the takeover is lost.
func (s *Store) TakeOver(ctx context.Context, scope, key string, seen int64, now, lockedUntil time.Time) (*idempotency.Record, error) {
	var rows []recordRow
	err := dbtx.Conn(ctx, s.db).Raw(`
UPDATE idempotency_records SET fence = fence + 1, locked_until = ?, updated_at = ?
WHERE merchant_id = ? AND idempotency_key = ? AND fence = ? AND state = 'executing'
  AND locked_until <= ? AND expires_at > ?
RETURNING *`,
		lockedUntil, now, scope, key, seen, now, now).Scan(&rows).Error
	switch {
	case err != nil:
		return nil, s.classify(err)
	case len(rows) == 0:
		return nil, idempotency.ErrFenced
	}
	return s.toRecord(rows[0])
}

// Checkpoint implements idempotency.Store.
func (s *Store) Checkpoint(ctx context.Context, scope, key string, fence int64, point string, now time.Time) error {
	return s.fenced(dbtx.Conn(ctx, s.db).Exec(`
UPDATE idempotency_records SET recovery_point = ?, updated_at = ?
WHERE merchant_id = ? AND idempotency_key = ? AND fence = ? AND state = 'executing'`,
		point, now, scope, key, fence))
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, scope, key string, fence int64, a idempotency.Answer, now time.Time) error {
	status, headers, body, keyID, err := s.encodeAnswer(scope, key, &a)
	if err != nil {
		return err
	}
	return s.fenced(dbtx.Conn(ctx, s.db).Exec(`
UPDATE idempotency_records SET state = 'completed', locked_until = ?, updated_at = ?,
    response_status = ?, response_headers = ?, response_body = ?, response_key_id = ?
WHERE merchant_id = ? AND idempotency_key = ? AND fence = ? AND state = 'executing'`,
		now, now, status, headers, body, keyID, scope, key, fence))
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, scope, key string, fence int64, now time.Time) error {
	conn := dbtx.Conn(ctx, s.db)
	// Nothing durable happened: give the key back entirely.
	res := conn.Exec(`
DELETE FROM idempotency_records
WHERE merchant_id = ? AND idempotency_key = ? AND fence = ? AND state = 'executing' AND recovery_point = ?`,
		scope, key, fence, idempotency.PointStarted)
	if res.Error != nil {
		return s.classify(res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	// Something durable happened (a payment row, a provider call): keep the
	// record and its recovery point, but unlock it so the next retry resumes.
	return s.fenced(conn.Exec(`
UPDATE idempotency_records SET locked_until = ?, updated_at = ?
WHERE merchant_id = ? AND idempotency_key = ? AND fence = ? AND state = 'executing'`,
		now, now, scope, key, fence))
}

// PurgeExpired implements janitor.Store: one batch of the records
// longest expired, chosen on the expiry index and deleted by address, as
// dbtx.Oldest explains.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if s.tombstoneTTL > 0 {
		return s.purgeTombstoning(ctx, now, limit)
	}
	res := dbtx.Conn(ctx, s.db).Exec(s.deleteExpired(limit), now)
	if res.Error != nil {
		return 0, s.classify(res.Error)
	}
	return int(res.RowsAffected), nil
}

// deleteExpired is the statement that deletes at most limit records
// expired at its argument, the longest expired first.
func (s *Store) deleteExpired(limit int) string {
	return dbtx.DeleteOldest(s.db, "idempotency_records", "expires_at <= ?", "expires_at", limit)
}

func (s *Store) fenced(res *gorm.DB) error {
	if res.Error != nil {
		return s.classify(res.Error)
	}
	if res.RowsAffected == 0 {
		return idempotency.ErrFenced
	}
	return nil
}

// encodeAnswer spells a as its columns; with a cipher, the body is
// encrypted for the record (scope, key) and keyID names the key.
// encodeAnswer spells a as its columns' arguments: nil (NULL) for no answer,
// and no key id for a body in clear.
func (s *Store) encodeAnswer(scope, key string, a *idempotency.Answer) (status, headers any, body []byte, keyID any, err error) {
	if a == nil {
		return nil, nil, nil, nil, nil
	}
	// An int, not a pointer to one: a status below 256 (201, 202) put in an
	// any costs no allocation (Go keeps the integers below 256 boxed).
	status, headers = a.Status, encodeHeaders(a.Header)
	if s.cipher == nil {
		return status, headers, a.Body, nil, nil
	}
	id, sealed, err := s.cipher.Seal(scope, key, a.Body)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return status, headers, sealed, id, nil
}

func (s *Store) toRecord(row recordRow) (*idempotency.Record, error) {
	rec := &idempotency.Record{
		Scope:       row.MerchantID,
		Key:         row.IdempotencyKey,
		Method:      row.Method,
		Path:        row.Path,
		Fingerprint: row.Fingerprint,
		State:       idempotency.State(row.State),
		Point:       row.RecoveryPoint,
		Fence:       row.Fence,
		LockedUntil: row.LockedUntil.UTC(),
		CreatedAt:   row.CreatedAt.UTC(),
		UpdatedAt:   row.UpdatedAt.UTC(),
		ExpiresAt:   row.ExpiresAt.UTC(),
		Sent:        [sha256.Size]byte(row.RequestDigest),
	}
	if row.ResponseStatus != nil {
		resp := &idempotency.Answer{Status: *row.ResponseStatus, Body: row.ResponseBody, Final: true}
		if row.ResponseKeyID != nil {
			if s.cipher == nil {
				return nil, fmt.Errorf("%w: %q (response encryption is off)", seal.ErrKeyUnknown, *row.ResponseKeyID)
			}
			body, err := s.cipher.Open(row.MerchantID, row.IdempotencyKey, *row.ResponseKeyID, row.ResponseBody)
			if err != nil {
				return nil, err
			}
			resp.Body = body
		}
		if resp.Body == nil {
			resp.Body = []byte{}
		}
		if row.ResponseHeaders != nil {
			var err error
			if resp.Header, err = decodeHeaders(*row.ResponseHeaders); err != nil {
				return nil, err
			}
		}
		rec.Answer = resp
	}
	return rec, nil
}

var errBadHeaders = errors.New("stored response headers are corrupt")

// InTx implements idempotency.Transactor with dbtx.Lazy: fn's transaction
// begins at its first statement, and on PostgreSQL the writes deferred in
// it (the record's insert among them) go in one pipeline at the commit. A
// record insert refused at the commit returns idempotency.ErrKeyExists,
// and nothing commits.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	err := dbtx.Lazy(ctx, s.db, fn)
	if err != nil && !dbtx.Carried(ctx) {
		return s.classify(err)
	}
	return err
}

// AfterCommit implements idempotency.Transactor (dbtx.AfterCommit).
func (s *Store) AfterCommit(ctx context.Context, fn func()) { dbtx.AfterCommit(ctx, fn) }

// digest is a request_digest column: a SHA-256 (idempotency.Record.Sent),
// NULL for a record stored before the column was, or another size, read as
// zero (unknown: the request is canonicalized), and zero written as NULL.
// pgx scans and encodes it through its pointer without an allocation
// (pgtype.BytesScanner, BytesValuer); database/sql through sql.Scanner and
// driver.Valuer.
type digest [sha256.Size]byte

// ScanBytes implements pgtype.BytesScanner.
func (d *digest) ScanBytes(b []byte) error {
	*d = digest{}
	if len(b) == len(d) {
		copy(d[:], b)
	}
	return nil
}

// Scan implements sql.Scanner.
func (d *digest) Scan(src any) error {
	b, _ := src.([]byte)
	return d.ScanBytes(b)
}

// BytesValue implements pgtype.BytesValuer: NULL for zero.
func (d *digest) BytesValue() ([]byte, error) {
	if *d == (digest{}) {
		return nil, nil
	}
	return d[:], nil
}

// Value implements driver.Valuer: NULL for zero.
func (d digest) Value() (driver.Value, error) {
	if d == (digest{}) {
		return nil, nil
	}
	return d[:], nil
}
