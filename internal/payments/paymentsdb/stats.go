package paymentsdb

import (
	"context"
	"time"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/payments"
)

// UnresolvedCounts is how many payments and refunds wait for their
// provider outcome, by status (pending or processing). A status with none
// is absent.
type UnresolvedCounts struct {
	Payments map[payments.Status]int
	Refunds  map[payments.Status]int
	// OldestPendingAttempt is the oldest last attempt of a pending payment
	// or refund; zero when none is pending. Past PENDING_CANCEL_AFTER (plus
	// a few reconciler rounds) the reconciler should have canceled it.
	OldestPendingAttempt time.Time
	// FlaggedCalls counts the outside calls whose provider answer failed
	// the money check, and FlaggedOrphans the orphans an operator must
	// handle: both wait for api flagged.
	FlaggedCalls, FlaggedOrphans int
}

// CountUnresolved counts the payments and refunds whose outcome is not
// known yet, for the metrics. Both queries read the reconciler's partial
// indexes, so the cost follows the unresolved rows, not the tables. It
// returns an error wrapping database.ErrUnavailable or another store error.
func (s *Store) CountUnresolved(ctx context.Context) (UnresolvedCounts, error) {
	out := UnresolvedCounts{Payments: map[payments.Status]int{}, Refunds: map[payments.Status]int{}}
	for _, t := range []struct {
		table string
		into  map[payments.Status]int
	}{{"payments", out.Payments}, {"refunds", out.Refunds}} {
		var rows []struct {
			Status string
			N      int
		}
		err := dbtx.Conn(ctx, s.db).Raw(`SELECT status, count(*) AS n FROM ` + t.table +
			` WHERE status IN ('pending', 'processing') GROUP BY status`).Scan(&rows).Error
		if err != nil {
			return UnresolvedCounts{}, database.Classify(err)
		}
		for _, r := range rows {
			t.into[payments.Status(r.Status)] = r.N
		}
	}
	var flagged struct{ Calls, Orphans int }
	err := dbtx.Conn(ctx, s.db).Raw(`SELECT
    (SELECT count(*) FROM outside_calls WHERE state = 'flagged') AS calls,
    (SELECT count(*) FROM orphans WHERE status = 'flagged') AS orphans`).Scan(&flagged).Error
	if err != nil {
		return UnresolvedCounts{}, database.Classify(err)
	}
	out.FlaggedCalls, out.FlaggedOrphans = flagged.Calls, flagged.Orphans
	if out.Payments[payments.StatusPending] == 0 && out.Refunds[payments.StatusPending] == 0 {
		return out, nil
	}
	// The last attempt is the outside call's: a retry that resumes a
	// payment records it there (internal/idempotency/call.go).
	var oldest struct{ At *time.Time }
	err = dbtx.Conn(ctx, s.db).Raw(`SELECT min(attempted_at) AS at FROM outside_calls
WHERE state = 'ready' AND kind IN ('payment', 'refund') AND due_at IS NOT NULL`).Scan(&oldest).Error
	if err != nil {
		return UnresolvedCounts{}, database.Classify(err)
	}
	if oldest.At != nil {
		out.OldestPendingAttempt = oldest.At.UTC()
	}
	return out, nil
}
