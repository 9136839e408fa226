package database_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestQueryExecModeFromTheURL: the query mode pgx uses is read from
// DATABASE_URL's default_query_exec_mode, which GORM's driver hands to pgx
// as it is; the mode PgBouncer in transaction mode needs is one parameter
// away, and a misspelt one stops the start.
func TestQueryExecModeFromTheURL(t *testing.T) {
	base := testkit.DatabaseURL(t, database.Postgres)
	for param, want := range map[string]pgx.QueryExecMode{
		"":                pgx.QueryExecModeCacheStatement, // pgx's default: prepared and cached per connection
		"exec":            pgx.QueryExecModeExec,
		"simple_protocol": pgx.QueryExecModeSimpleProtocol,
		"cache_describe":  pgx.QueryExecModeCacheDescribe,
		"describe_exec":   pgx.QueryExecModeDescribeExec,
		"cache_statement": pgx.QueryExecModeCacheStatement,
	} {
		t.Run("mode="+param, func(t *testing.T) {
			url := base
			if param != "" {
				var err error
				url, err = testkit.WithQuery(base, "default_query_exec_mode", param)
				require.NoError(t, err)
			}
			db, err := database.Open(url, database.Options{MaxOpenConns: 1})
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			sqlDB, err := db.DB.DB()
			require.NoError(t, err)
			conn, err := sqlDB.Conn(context.Background())
			require.NoError(t, err)
			var got pgx.QueryExecMode
			require.NoError(t, conn.Raw(func(dc any) error {
				got = dc.(*stdlib.Conn).Conn().Config().DefaultQueryExecMode
				return nil
			}))
			require.NoError(t, conn.Close()) // back to the pool of one
			require.Equal(t, want, got)
			// And the store works in it: a write and a read with arguments.
			require.NoError(t, db.Exec("CREATE TABLE IF NOT EXISTS mode_check (k text PRIMARY KEY, v bytea)").Error)
			require.NoError(t, db.Exec("INSERT INTO mode_check (k, v) VALUES (?, ?)", "k-"+param, []byte{0, 1, 2}).Error)
			var v []byte
			require.NoError(t, db.Raw("SELECT v FROM mode_check WHERE k = ?", "k-"+param).Row().Scan(&v))
			require.Equal(t, []byte{0, 1, 2}, v)
		})
	}

	bad, err := testkit.WithQuery(strings.Replace(base, "postgres@", "postgres:hunter2@", 1), "default_query_exec_mode", "exce")
	require.NoError(t, err)
	_, err = database.Open(bad, database.Options{})
	require.ErrorContains(t, err, "default_query_exec_mode")
	require.NotContains(t, err.Error(), "hunter2", "no password in the message")
}

// TestHangUpLetsTheStatementFinish: a statement whose context ends while it
// runs (the client hung up) is let finish, and its connection stays in the
// pool (the same backend serves the next statement). pgx's default closed
// the connection at once and sent PostgreSQL a cancel request, which the
// server logs as an ERROR ("canceling statement due to user request"), and
// the pool opened a new connection for the next request.
func TestHangUpLetsTheStatementFinish(t *testing.T) {
	db, err := database.Open(testkit.DatabaseURL(t, database.Postgres), database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var before, after int64
	require.NoError(t, db.Raw("SELECT pg_backend_pid()").Row().Scan(&before))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_ = db.WithContext(ctx).Exec("SELECT pg_sleep(0.2)").Error

	require.NoError(t, db.Raw("SELECT pg_backend_pid()").Row().Scan(&after))
	require.Equal(t, before, after, "the connection was kept, not closed with a cancel request")
}
