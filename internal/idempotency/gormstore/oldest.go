package gormstore

import (
	"strconv"

	"gorm.io/gorm"
)

// DeleteOldest spells, for db's dialect, the statement of a retention
// purge: it deletes at most limit rows of table that match where, the
// first ones in order, and takes where's arguments once. Every janitor in
// the service drains its table with it, one small batch per statement, so
// that each statement holds few locks and live traffic never waits long.
//
// On PostgreSQL the batch is chosen first and deleted by physical row
// address:
//
//	DELETE FROM t WHERE ctid = ANY(ARRAY(
//	    SELECT ctid FROM t WHERE <where> ORDER BY <order> LIMIT n FOR UPDATE SKIP LOCKED))
//
// The shape is forced: ARRAY(…) runs once, on the index that serves order,
// and the delete is a TID scan of the batch, whatever the statistics say.
// The earlier "(key) IN (SELECT key … LIMIT n) AND <where>" let the planner
// choose, and when the table's statistics were older than the backlog (a
// million records expired since the last ANALYZE, estimated at one row)
// it walked the whole backlog for each batch: one batch of 500 ran past a
// minute, and the janitor purged nothing for as long as load ran.
//
// FOR UPDATE SKIP LOCKED is what makes the batch safe to delete without
// testing where again: its rows are locked, re-checked against where if a
// client changed them since the statement began (a record renewed is no
// longer expired, and is left out), and nobody can change them until the
// commit. A row that a request holds now is skipped, not waited for; the
// next round takes it if it is still due.
//
// The limit is written into the statement, not passed as a parameter: the
// driver prepares a statement once, and after a few runs PostgreSQL may
// switch to a generic plan, which for "LIMIT $n" guesses a tenth of the
// table and prefers a full scan to the index.
//
// SQLite has one writer, so a statement cannot meet a row changed under
// it; the batch is chosen the same way and deleted by rowid.
func DeleteOldest(db *gorm.DB, table, where, order string, limit int) string {
	n := strconv.Itoa(limit)
	if db.Name() == "postgres" {
		return `
DELETE FROM ` + table + ` WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM ` + table + ` WHERE ` + where + `
    ORDER BY ` + order + ` LIMIT ` + n + ` FOR UPDATE SKIP LOCKED))`
	}
	return `
DELETE FROM ` + table + ` WHERE rowid IN (
    SELECT rowid FROM ` + table + ` WHERE ` + where + `
    ORDER BY ` + order + ` LIMIT ` + n + `)`
}
