package dbtx_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestScanRowReturnsTheErrorOfAStatementThatNeverRan: a statement whose
// transaction could not begin (the database away, a failover under way)
// never runs. GORM's Row then returns a nil *sql.Row, whose Scan panicked:
// make chaos's failover scenario answered a payment 500 from that panic.
// ScanRow returns the error instead, on both dialects.
func TestScanRowReturnsTheErrorOfAStatementThatNeverRan(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			db := testkit.OpenDB(t, dialect)
			var n int
			require.NoError(t, dbtx.ScanRow(db.Raw("SELECT 1"), &n))
			require.Equal(t, 1, n)
			require.ErrorIs(t, dbtx.ScanRow(db.Raw("SELECT 1 WHERE 1 = 0"), &n), sql.ErrNoRows)

			away := errors.New("the database is away")
			broken := db.Raw("SELECT 1")
			_ = broken.AddError(away)
			require.NotPanics(t, func() {
				require.ErrorIs(t, dbtx.ScanRow(broken, &n), away)
			})
			require.Nil(t, func() *sql.Row { b := db.Raw("SELECT 1"); _ = b.AddError(away); return b.Row() }(),
				"GORM's Row is nil for a statement that never ran: Row().Scan would panic")
		})
	}
}
