package database_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestStatementsAreSpansWithoutTheirValues: inside a trace, each statement
// is a client span named by its operation and table, with its SQL and
// never its arguments, not even in the error of a statement that failed on
// one; outside a trace (the background polling) nothing is recorded; and
// on PostgreSQL a pipelined batch, which goes around GORM, is one span.
func TestStatementsAreSpansWithoutTheirValues(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			db, err := database.Open(testkit.DatabaseURL(t, dialect), database.Options{MaxOpenConns: 2, Tracing: tp})
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })

			bg := context.Background()
			require.NoError(t, db.WithContext(bg).Exec("CREATE TABLE trace_probe (k TEXT PRIMARY KEY)").Error)
			require.Empty(t, exp.GetSpans(), "a statement outside a trace is not recorded")

			const secret = "idem-key-f3a9c1-secret"
			ctx, root := tp.Tracer("test").Start(bg, "request")
			require.NoError(t, db.WithContext(ctx).Exec("INSERT INTO trace_probe (k) VALUES (?)", secret).Error)
			require.Error(t, db.WithContext(ctx).Exec("INSERT INTO trace_probe (k) VALUES (?)", secret).Error, "a unique clash")
			var n int64
			require.NoError(t, db.WithContext(ctx).Raw("SELECT count(*) FROM trace_probe WHERE k = ?", secret).Scan(&n).Error)
			require.EqualValues(t, 1, n)
			want := 3
			if dialect == database.Postgres {
				// PostgreSQL quotes a value it cannot read in its message.
				require.Error(t, db.WithContext(ctx).Exec("SELECT CAST(? AS uuid)", secret).Error)
				sqlDB, err := db.DB.DB()
				require.NoError(t, err)
				conn, err := sqlDB.Conn(ctx)
				require.NoError(t, err)
				require.NoError(t, conn.Raw(func(dc any) error {
					b := &pgx.Batch{}
					b.Queue("INSERT INTO trace_probe (k) VALUES ($1)", secret+"-2")
					b.Queue("SELECT k FROM trace_probe WHERE k = $1", secret)
					return dc.(*stdlib.Conn).Conn().SendBatch(ctx, b).Close()
				}))
				require.NoError(t, conn.Close())
				want += 2
			}
			root.End()

			byName := map[string][]tracetest.SpanStub{}
			var statements int
			for _, s := range exp.GetSpans() {
				txt := fmt.Sprint(s.Name, s.Attributes, s.Events, s.Status)
				require.NotContains(t, txt, secret, "span %q", s.Name)
				if s.Name == "request" {
					continue
				}
				statements++
				require.Equal(t, root.SpanContext().SpanID(), s.Parent.SpanID(), "span %q is the request's", s.Name)
				require.Contains(t, s.Attributes, attribute.String("db.system.name", map[database.Dialect]string{
					database.Postgres: "postgresql", database.SQLite: "sqlite"}[dialect]))
				byName[s.Name] = append(byName[s.Name], s)
			}
			require.Equal(t, want, statements, "%v", byName)

			inserts := byName["INSERT trace_probe"]
			require.Len(t, inserts, 2, "%v", byName)
			require.Equal(t, codes.Unset, inserts[0].Status.Code)
			require.Equal(t, codes.Error, inserts[1].Status.Code, "the clash is the span's error")
			query := attr(inserts[0], "db.query.text")
			require.True(t, strings.HasPrefix(query, "INSERT INTO trace_probe (k) VALUES ("), query)
			require.Equal(t, "trace_probe", attr(inserts[0], "db.collection.name"))
			require.Len(t, byName["SELECT trace_probe"], 1, "%v", byName)
			if dialect == database.Postgres {
				require.Equal(t, "23505", attr(inserts[1], "db.response.status_code"))
				cast := byName["SELECT"]
				require.Len(t, cast, 1, "%v", byName)
				require.Equal(t, "SQLSTATE 22P02", cast[0].Status.Description)
				batch := byName["BATCH"]
				require.Len(t, batch, 1, "%v", byName)
				require.Equal(t, "2", attr(batch[0], "db.operation.batch.size"))
				require.Equal(t, "INSERT INTO trace_probe (k) VALUES ($1); SELECT k FROM trace_probe WHERE k = $1", attr(batch[0], "db.query.text"))
			}
		})
	}
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
