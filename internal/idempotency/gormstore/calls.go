package gormstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/idempotency"
)

// callColumns are outside_calls' columns in the order callRow scans them.
const callColumns = `merchant_id, id, kind, client_key, record_created_at, call_key, key_version, key_fingerprint, state,
    intent_fence, intent_at, attempted_at, due_at, checks, trace_parent, created_at, updated_at`

// InsertCall implements idempotency.Store. It runs at once, never deferred
// to the commit: a clash is an answer (ErrKeyExists), not a failure, so
// the statement skips the row instead of failing, which on PostgreSQL
// would abort the transaction (and log an error naming the row's key).
func (s *Store) InsertCall(ctx context.Context, c *idempotency.Call) error {
	res := dbtx.Conn(ctx, s.db).Exec(`INSERT INTO outside_calls (`+callColumns+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		c.Scope, c.ID, c.Kind, c.ClientKey, nullTime(c.RecordCreatedAt), c.Key, c.KeyVersion, nullString(c.KeyFingerprint),
		string(c.State), c.IntentFence,
		nullTime(c.IntentAt), c.AttemptedAt, nullTime(c.DueAt), c.Checks, c.TraceParent, c.CreatedAt, c.UpdatedAt)
	switch {
	case res.Error != nil:
		return s.classify(res.Error)
	case res.RowsAffected == 0:
		return idempotency.ErrKeyExists
	}
	return nil
}

// LockCall implements idempotency.Store. On PostgreSQL the row is locked
// (FOR UPDATE) until the transaction ends; SQLite's transactions hold the
// database's write lock from BEGIN (see database.Open), which serialises
// them anyway.
func (s *Store) LockCall(ctx context.Context, scope, id string) (*idempotency.Call, error) {
	q := `SELECT ` + callColumns + ` FROM outside_calls WHERE merchant_id = ? AND id = ?`
	if s.db.Name() == "postgres" && dbtx.Carried(ctx) {
		q += ` FOR UPDATE`
	}
	rows, err := s.scanCalls(ctx, q, scope, id)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, idempotency.ErrNotFound
	}
	return &rows[0], nil
}

// SaveCall implements idempotency.Store.
func (s *Store) SaveCall(ctx context.Context, c *idempotency.Call) error {
	res := dbtx.Conn(ctx, s.db).Exec(`UPDATE outside_calls SET state = ?, intent_fence = ?, intent_at = ?,
    attempted_at = ?, due_at = ?, checks = ?, updated_at = ?
WHERE merchant_id = ? AND id = ?`,
		string(c.State), c.IntentFence, nullTime(c.IntentAt), c.AttemptedAt, nullTime(c.DueAt), c.Checks, c.UpdatedAt,
		c.Scope, c.ID)
	if res.Error != nil {
		return s.classify(res.Error)
	}
	if res.RowsAffected == 0 {
		return idempotency.ErrNotFound
	}
	return nil
}

// CountCalls implements idempotency.Store. A call from before calls knew
// their record (record_created_at NULL) counts as an earlier record's.
func (s *Store) CountCalls(ctx context.Context, scope, clientKey, kind string, recordCreatedAt time.Time) (int, error) {
	var n int
	err := dbtx.ScanRow(dbtx.Conn(ctx, s.db).Raw(`SELECT count(*) FROM outside_calls
WHERE merchant_id = ? AND client_key = ? AND kind = ? AND (record_created_at IS NULL OR record_created_at < ?)`,
		scope, clientKey, kind, recordCreatedAt), &n)
	return n, s.classifyErr(err)
}

// ClaimDue implements idempotency.Store in one statement: a window numbers
// each scope's due calls, oldest due first; the first perScope of each, up
// to limit, are then locked by address with SKIP LOCKED (a row another
// transaction holds drops out, the rest are re-checked against "due" if
// they changed meanwhile, as dbtx.Oldest explains) and moved to until. The
// limits are written into the statement, as PurgeExpired explains.
func (s *Store) ClaimDue(ctx context.Context, now, until time.Time, limit, perScope int) ([]idempotency.Call, error) {
	due := `
    SELECT %[1]s FROM (
        SELECT %[1]s, due_at, id, row_number() OVER (PARTITION BY merchant_id ORDER BY due_at, id) AS scope_rank
        FROM outside_calls WHERE due_at IS NOT NULL AND due_at <= ?) due
    WHERE scope_rank <= ` + strconv.Itoa(perScope) + ` ORDER BY due_at, id LIMIT ` + strconv.Itoa(limit)
	var q string
	if s.db.Name() == "postgres" {
		q = `UPDATE outside_calls SET due_at = ? WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM outside_calls WHERE ctid = ANY(ARRAY(` + fmt.Sprintf(due, "ctid") + `))
    AND due_at IS NOT NULL AND due_at <= ? FOR UPDATE SKIP LOCKED))
RETURNING ` + callColumns
	} else {
		q = `UPDATE outside_calls SET due_at = ? WHERE rowid IN (` + fmt.Sprintf(due, "rowid") + `) AND due_at <= ?
RETURNING ` + callColumns
	}
	calls, err := s.scanCalls(ctx, q, until, now, now)
	slices.SortFunc(calls, func(a, b idempotency.Call) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return calls, err
}

// FlaggedCalls returns up to limit flagged calls, the longest flagged
// first: what api flagged lists for an operator.
func (s *Store) FlaggedCalls(ctx context.Context, limit int) ([]idempotency.Call, error) {
	return s.scanCalls(ctx, `SELECT `+callColumns+` FROM outside_calls WHERE state = 'flagged'
ORDER BY updated_at, id LIMIT `+strconv.Itoa(limit))
}

func (s *Store) scanCalls(ctx context.Context, q string, args ...any) ([]idempotency.Call, error) {
	rows, err := dbtx.Conn(ctx, s.db).Raw(q, args...).Rows()
	if err != nil {
		return nil, s.classify(err)
	}
	defer rows.Close()
	var out []idempotency.Call
	for rows.Next() {
		var (
			c                              idempotency.Call
			state                          string
			fingerprint                    sql.NullString
			recordCreated, intentAt, dueAt sql.NullTime
			attempted, created, updated    time.Time
		)
		if err := rows.Scan(&c.Scope, &c.ID, &c.Kind, &c.ClientKey, &recordCreated, &c.Key, &c.KeyVersion, &fingerprint, &state,
			&c.IntentFence, &intentAt, &attempted, &dueAt, &c.Checks, &c.TraceParent, &created, &updated); err != nil {
			return nil, s.classify(err)
		}
		c.KeyFingerprint = fingerprint.String
		c.State = idempotency.CallState(state)
		c.RecordCreatedAt, c.IntentAt, c.DueAt = utcOrZero(recordCreated), utcOrZero(intentAt), utcOrZero(dueAt)
		c.AttemptedAt, c.CreatedAt, c.UpdatedAt = attempted.UTC(), created.UTC(), updated.UTC()
		out = append(out, c)
	}
	return out, s.classifyErr(rows.Err())
}

func (s *Store) classifyErr(err error) error {
	if err == nil {
		return nil
	}
	return s.classify(err)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// KeyFingerprints checks the secret an instance derives keys with against
// the calls made since since (those a retry may still resume, or re-derive
// after its rows were lost): calls from before fingerprints were kept are
// first given current's (the secret in force when they were added), then it
// returns a fingerprint none of known is (another secret derived those
// calls), or "" when all agree.
func (s *Store) KeyFingerprints(ctx context.Context, current string, known []string, since time.Time) (string, error) {
	err := dbtx.Conn(ctx, s.db).Exec(`UPDATE outside_calls SET key_fingerprint = ? WHERE key_fingerprint IS NULL AND key_version = 1`, current).Error
	if err != nil {
		return "", s.classify(err)
	}
	var other []string
	err = dbtx.Conn(ctx, s.db).Raw(`SELECT key_fingerprint FROM outside_calls
WHERE created_at >= ? AND key_fingerprint IS NOT NULL AND key_fingerprint NOT IN ? LIMIT 1`, since, append(known, current)).Scan(&other).Error
	if err != nil || len(other) == 0 {
		return "", s.classifyErr(err)
	}
	return other[0], nil
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func utcOrZero(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}
