package gormstore

import (
	"context"
	"time"

	"github.com/idemkeys/payments/internal/dbtx"
)

// ExecutingStats describes the live records that are still executing: the
// ones an operator watches for stuck operations.
type ExecutingStats struct {
	// Locked counts the records whose lock still runs: a request is (or
	// was, until a moment ago) working on them.
	Locked int
	// Unlocked counts the records whose lock has run out or was given back
	// with something durable behind it: a crashed request, a 502 or a 202
	// waiting for a retry, the reconciler or a webhook to finish them.
	Unlocked int
	// OldestCreatedAt is when the oldest of them was reserved; zero when
	// there are none.
	OldestCreatedAt time.Time
}

// ExecutingStats counts the live executing records at now. Both queries
// read the partial index on executing records (migration 00005), so the
// cost follows the few open records, not the table. It returns a store
// error.
func (s *Store) ExecutingStats(ctx context.Context, now time.Time) (ExecutingStats, error) {
	conn := dbtx.Conn(ctx, s.db)
	var counts struct {
		Total    int
		Unlocked int
	}
	err := conn.Raw(`
SELECT count(*) AS total,
       COALESCE(SUM(CASE WHEN locked_until <= ? THEN 1 ELSE 0 END), 0) AS unlocked
FROM idempotency_records
WHERE state = 'executing' AND expires_at > ?`, now, now).Scan(&counts).Error
	if err != nil {
		return ExecutingStats{}, s.classify(err)
	}
	stats := ExecutingStats{Locked: counts.Total - counts.Unlocked, Unlocked: counts.Unlocked}
	if counts.Total == 0 {
		return stats, nil
	}
	// A plain column, not MIN(): SQLite then keeps its declared type and
	// the driver hands back a time.
	var rows []recordRow
	err = conn.Select("created_at").
		Where("state = 'executing' AND expires_at > ?", now).
		Order("created_at").Limit(1).Find(&rows).Error
	if err != nil {
		return ExecutingStats{}, s.classify(err)
	}
	if len(rows) > 0 {
		stats.OldestCreatedAt = rows[0].CreatedAt.UTC()
	}
	return stats, nil
}
