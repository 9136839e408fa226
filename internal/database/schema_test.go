package database_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency/gormstore/gormtest"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestLibrarySchemaMatchesTheMigrations: gormstore.Schema, the DDL a
// service without migrations of its own runs, and this project's
// migrations build the same idempotency tables, column for column, on
// both dialects. The two are written twice on purpose (the library stands
// alone); this test keeps them one.
func TestLibrarySchemaMatchesTheMigrations(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			migrated := testkit.OpenDB(t, dialect).DB
			library := gormtest.Open(t, string(dialect))
			for _, table := range []string{"idempotency_records", "idempotency_tombstones", "outside_calls"} {
				want := columns(t, migrated, dialect, table)
				require.NotEmpty(t, want, table)
				require.Equal(t, want, columns(t, library, dialect, table), "%s: the library's schema and the migrations differ", table)
			}
		})
	}
}

// columns lists table's columns as "name nullable", in order.
func columns(t *testing.T, db *gorm.DB, dialect database.Dialect, table string) []string {
	t.Helper()
	q := `SELECT column_name || ' ' || is_nullable FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`
	if dialect == database.SQLite {
		q = `SELECT name || ' ' || CASE WHEN "notnull" = 1 OR pk > 0 THEN 'NO' ELSE 'YES' END FROM pragma_table_info(?) ORDER BY cid`
	}
	var out []string
	require.NoError(t, db.Raw(q, table).Scan(&out).Error)
	return out
}
