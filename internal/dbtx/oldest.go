package dbtx

import (
	"context"
	"strconv"

	"gorm.io/gorm"
)

// DeleteOldest spells, for db's dialect, the statement of a retention
// purge: it deletes at most limit rows of table that match where, the
// first ones in order (Oldest), and takes where's arguments once. Every
// janitor in the service drains its table with it, one small batch per
// statement, so that each statement holds few locks and live traffic never
// waits long.
func DeleteOldest(db *gorm.DB, table, where, order string, limit int) string {
	return `
DELETE FROM ` + table + ` WHERE ` + Oldest(db, table, where, order, limit)
}

// Purge runs DeleteOldest's statement for table in the transaction ctx
// carries, if any, and returns how many rows it deleted: one batch of a
// retention purge. Its error is the driver's, for the caller to classify.
func Purge(ctx context.Context, db *gorm.DB, table, where, order string, limit int, args ...any) (int, error) {
	res := Conn(ctx, db).Exec(DeleteOldest(db, table, where, order, limit), args...)
	if res.Error != nil {
		return 0, res.Error
	}
	return int(res.RowsAffected), nil
}

// Oldest spells, for db's dialect, the condition that picks a batch of at
// most limit rows of table that match where, the first ones in order, for
// a statement that then changes or deletes exactly those rows (a purge, the
// outbox's claim). On PostgreSQL the batch is chosen first and the rows are
// then found by their physical address:
//
//	ctid = ANY(ARRAY(SELECT ctid FROM t WHERE <where> ORDER BY <order> LIMIT n FOR UPDATE SKIP LOCKED))
//
// The shape is forced: ARRAY(…) runs once, on the index that serves order,
// and the outer statement is a TID scan of the batch, whatever the
// statistics say. The earlier "(key) IN (SELECT key … LIMIT n) AND <where>"
// let the planner choose, and when the table's statistics were older than
// the backlog (a million records expired since the last ANALYZE, estimated
// at one row) it walked the whole backlog for each batch: one batch of 500
// ran past a minute, and the janitor purged nothing for as long as load
// ran.
//
// FOR UPDATE SKIP LOCKED is what makes the batch safe to change without
// testing where again: its rows are locked as they are chosen (a row
// changed since the statement began is re-checked against where first, so
// a record renewed meanwhile is left out), and nobody can change them until
// the commit. A row that another transaction holds is skipped, not waited
// for: the next round takes it if it still matches, and two dispatchers
// claim different rows.
//
// The limit is written into the statement, not passed as a parameter: the
// driver prepares a statement once, and after a few runs PostgreSQL may
// switch to a generic plan, which for "LIMIT $n" guesses a tenth of the
// table and prefers a full scan to the index.
//
// SQLite has one writer, so a statement cannot meet a row changed under
// it; the batch is chosen the same way and found by rowid.
func Oldest(db *gorm.DB, table, where, order string, limit int) string {
	n := strconv.Itoa(limit)
	if db.Name() == "postgres" {
		return `ctid = ANY(ARRAY(
    SELECT ctid FROM ` + table + ` WHERE ` + where + `
    ORDER BY ` + order + ` LIMIT ` + n + ` FOR UPDATE SKIP LOCKED))`
	}
	return `rowid IN (
    SELECT rowid FROM ` + table + ` WHERE ` + where + `
    ORDER BY ` + order + ` LIMIT ` + n + `)`
}
