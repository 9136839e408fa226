package gormstore

import (
	"context"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/idempotency"
)

// Tombstones (WithTombstones): when the janitor purges an expired record it
// leaves a compact row in idempotency_tombstones (scope, key, fingerprint,
// first-seen, purge and expiry times) in the same transaction, and a new
// record is inserted only where no live tombstone stands: one NOT EXISTS
// on the tombstones' primary key inside the insert itself, so the create
// path gains no round trip. An expired record that the janitor has not
// purged yet is never replaced either; Get reports both as expired.

// WithTombstones makes the store keep a tombstone of every record it purges
// for ttl after the record expired, and refuse to insert a record under a
// key that has one or whose expired record is still there. The Keeper then
// refuses such a key (ErrKeyExpired, ErrKeyReused): it executes nothing
// again for ttl.
func WithTombstones(ttl time.Duration) Option {
	return func(s *Store) { s.tombstoneTTL = ttl }
}

// insertTombstonedSQL is insertSQL for a store with tombstones: the same
// columns, inserted only when no live tombstone holds the key, and an
// expired record replaced only once its tombstone time has passed too
// (a record the janitor never got to). PostgreSQL cannot infer the types of
// parameters in an INSERT ... SELECT, so they are cast there.
const insertTombstonedSQL = `
INSERT INTO idempotency_records AS r (
    merchant_id, idempotency_key, method, path, fingerprint, state, recovery_point,
    fence, locked_until, response_status, response_headers, response_body, response_key_id,
    created_at, updated_at, expires_at, request_digest)
SELECT {t}, {t}, {t}, {t}, {t}, {t}, {t}, {bigint}, {ts}, {int}, {t}, {bytes}, {t}, {ts}, {ts}, {ts}, {bytes}
WHERE NOT EXISTS (
    SELECT 1 FROM idempotency_tombstones b
    WHERE b.merchant_id = {t} AND b.idempotency_key = {t} AND b.expires_at > {ts})
ON CONFLICT (merchant_id, idempotency_key) DO UPDATE SET
    method = excluded.method, path = excluded.path, fingerprint = excluded.fingerprint,
    state = excluded.state, recovery_point = excluded.recovery_point,
    fence = CASE WHEN r.fence < excluded.fence THEN excluded.fence ELSE r.fence + 1 END,
    locked_until = excluded.locked_until,
    response_status = excluded.response_status, response_headers = excluded.response_headers,
    response_body = excluded.response_body, response_key_id = excluded.response_key_id,
    created_at = excluded.created_at,
    updated_at = excluded.updated_at, expires_at = excluded.expires_at, request_digest = excluded.request_digest
WHERE r.expires_at <= {ts}
RETURNING fence`

// fastInsertTombstoned is FastInsertSQL for a store with tombstones: a live
// tombstone under the key makes it fail too, with an error that carries no
// data (a NULL in a NOT NULL column would make PostgreSQL log the whole row,
// the answer included). The fence is the first fence plus a lookup of the
// tombstone that yields nothing, or fails: it casts tombstoneTaken to an integer, and
// PostgreSQL names only that text. The cast hangs on the row's column so
// that the planner cannot compute it ahead (a constant would fail always).
// The same arguments: the tombstone is looked up by the record's scope, key
// and creation time.
var fastInsertTombstoned = strings.Replace(FastInsertSQL, "$7, $8, $9,", `$7,
    $8::bigint + coalesce((
        SELECT ('`+tombstoneTaken+`' || left(b.merchant_id, 0))::integer
        FROM idempotency_tombstones b
        WHERE b.merchant_id = $1 AND b.idempotency_key = $2 AND b.expires_at > $14), 0),
    $9,`, 1)

// tombstoneTaken is the text fastInsertTombstoned fails with.
const tombstoneTaken = "a live tombstone holds this idempotency key"

// insertTombstoned spells insertTombstonedSQL for the store's dialect.
func (s *Store) insertTombstoned() string {
	casts := map[string]string{"{t}": "?", "{ts}": "?", "{int}": "?", "{bigint}": "?", "{bytes}": "?"}
	if s.db.Name() == "postgres" {
		// "?::type", not CAST(? AS type): GORM spreads a slice argument
		// (the []byte of a body) over a placeholder that follows "(".
		casts = map[string]string{"{t}": "?::text", "{ts}": "?::timestamptz", "{int}": "?::integer", "{bigint}": "?::bigint", "{bytes}": "?::bytea"}
	}
	q := insertTombstonedSQL
	for k, v := range casts {
		q = strings.ReplaceAll(q, k, v)
	}
	return q
}

// tombstoneRow is one row of idempotency_tombstones, as insertStones
// writes it.
type tombstoneRow struct {
	MerchantID     string
	IdempotencyKey string
	Fingerprint    string
	FirstSeenAt    time.Time
	PurgedAt       time.Time
	ExpiresAt      time.Time
}

// getTombstonedSQL is getSQL for a store with tombstones: the live record,
// or what is remembered of an expired key in state expired: its record
// while the janitor has not purged it, else its live tombstone (no
// recovery point, its expiry the tombstone's). One statement, so that the
// read every new key starts with costs no second round trip. The
// arguments: now, scope, key, scope, key, now.
const getTombstonedSQL = `SELECT method, path, fingerprint,
    CASE WHEN expires_at > ? THEN state ELSE 'expired' END, recovery_point,
    fence, locked_until, response_status, response_headers, response_body, response_key_id,
    created_at, updated_at, expires_at, request_digest
FROM idempotency_records WHERE merchant_id = ? AND idempotency_key = ?
UNION ALL
SELECT '', '', fingerprint, 'expired', '',
    0, expires_at, NULL, NULL, NULL, NULL,
    first_seen_at, purged_at, expires_at, NULL
FROM idempotency_tombstones WHERE merchant_id = ? AND idempotency_key = ? AND expires_at > ?`

// expired is the record in state expired that getTombstonedSQL read at
// now: the request's fingerprint and times, no answer; ErrNotFound once
// the tombstone time has passed (a record the janitor never got to). A
// tombstone (no recovery point) expires as its record did, the tombstone
// TTL before itself.
func (s *Store) expired(row recordRow, now time.Time) (*idempotency.Record, error) {
	expiresAt := row.ExpiresAt
	if row.RecoveryPoint == "" {
		expiresAt = expiresAt.Add(-s.tombstoneTTL)
	}
	if !expiresAt.After(now.Add(-s.tombstoneTTL)) {
		return nil, idempotency.ErrNotFound
	}
	return &idempotency.Record{
		Scope: row.MerchantID, Key: row.IdempotencyKey, Fingerprint: row.Fingerprint, State: idempotency.StateExpired,
		CreatedAt: row.CreatedAt.UTC(), UpdatedAt: row.UpdatedAt.UTC(), ExpiresAt: expiresAt.UTC(),
	}, nil
}

// purgeTombstoning is PurgeExpired for a store with tombstones: in one
// transaction, deleteExpired deletes a batch and returns it, and the
// batch's tombstones are written, so a record is never gone without its
// tombstone. (A DELETE that named the batch's 500 keys instead took
// PostgreSQL longer to plan than to run: some 130 ms a batch, against 20.)
func (s *Store) purgeTombstoning(ctx context.Context, now time.Time, limit int) (int, error) {
	n := 0
	err := dbtx.Transaction(ctx, s.db, func(ctx context.Context) error {
		conn := dbtx.Conn(ctx, s.db)
		var batch []recordRow
		err := conn.Raw(s.deleteExpired(limit)+`
RETURNING merchant_id, idempotency_key, fingerprint, created_at, expires_at`, now).Scan(&batch).Error
		if err != nil || len(batch) == 0 {
			return err
		}
		stones := make([]tombstoneRow, len(batch))
		for i, r := range batch {
			stones[i] = tombstoneRow{
				MerchantID: r.MerchantID, IdempotencyKey: r.IdempotencyKey, Fingerprint: r.Fingerprint,
				FirstSeenAt: r.CreatedAt.UTC(), PurgedAt: now, ExpiresAt: r.ExpiresAt.UTC().Add(s.tombstoneTTL),
			}
		}
		n = len(batch)
		return insertStones(conn, stones)
	})
	if err != nil {
		return 0, s.classify(err)
	}
	return n, nil
}

// insertStones writes tombstones, replacing an older one of the same key
// (a key reused after its earlier tombstone ran out, and expired again).
func insertStones(conn *gorm.DB, stones []tombstoneRow) error {
	var sb strings.Builder
	sb.WriteString(`INSERT INTO idempotency_tombstones (merchant_id, idempotency_key, fingerprint, first_seen_at, purged_at, expires_at) VALUES `)
	args := make([]any, 0, 6*len(stones))
	for i, b := range stones {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?)")
		args = append(args, b.MerchantID, b.IdempotencyKey, b.Fingerprint, b.FirstSeenAt, b.PurgedAt, b.ExpiresAt)
	}
	sb.WriteString(` ON CONFLICT (merchant_id, idempotency_key) DO UPDATE SET fingerprint = excluded.fingerprint,
    first_seen_at = excluded.first_seen_at, purged_at = excluded.purged_at, expires_at = excluded.expires_at`)
	return conn.Exec(sb.String(), args...).Error
}

// PurgeTombstones implements janitor.Store: it deletes at most limit
// tombstones whose time has passed, the oldest first, as PurgeExpired
// deletes records.
func (s *Store) PurgeTombstones(ctx context.Context, now time.Time, limit int) (int, error) {
	if s.tombstoneTTL <= 0 {
		return 0, nil
	}
	n, err := dbtx.Purge(ctx, s.db, "idempotency_tombstones", "expires_at <= ?", "expires_at", limit, now)
	return n, s.classifyErr(err)
}
