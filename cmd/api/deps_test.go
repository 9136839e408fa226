package main

import (
	"context"
	"database/sql"
	"debug/buildinfo"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/testkit"
)

// foreignModules are modules the API has no use for: database drivers of
// engines it does not run on (an instrumentation library once compiled
// ClickHouse's and MySQL's into it), their compression codecs, and cgo's
// SQLite. (Gin links MongoDB's bson package for its optional binding;
// that module, go.mongodb.org/mongo-driver/v2, holds no driver code in
// the binary.) A forked service that adds one of these engines removes
// its line.
var foreignModules = []string{
	"github.com/ClickHouse/",
	"gorm.io/driver/clickhouse",
	"github.com/go-sql-driver/mysql",
	"gorm.io/driver/mysql",
	"gorm.io/driver/sqlserver",
	"github.com/microsoft/go-mssqldb",
	"github.com/denisenkom/go-mssqldb",
	"github.com/sijms/go-ora",
	"github.com/lib/pq",
	"github.com/mattn/go-sqlite3",
	"gorm.io/driver/sqlite",
	"github.com/pierrec/lz4",
	"github.com/andybalholm/brotli",
	"gorm.io/plugin/opentelemetry",
	"github.com/ugorji/go", // Gin's MessagePack codec: builds use -tags nomsgpack
}

// TestTheAPIBinaryHoldsOnlyItsOwnDrivers builds cmd/api with the tags
// make run, make build and the Dockerfile use (the other flags of the last
// two would rebuild every package, not only the few the tag changes) and
// reads the modules it was linked from, as `go version -m` prints them:
// none of foreignModules is among them, and its database/sql drivers are
// PostgreSQL's (pgx) and SQLite's.
func TestTheAPIBinaryHoldsOnlyItsOwnDrivers(t *testing.T) {
	testkit.EndToEnd(t)
	bin := filepath.Join(t.TempDir(), "api")
	out, err := exec.CommandContext(context.Background(), "go", "build", "-tags", "nomsgpack", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	info, err := buildinfo.ReadFile(bin)
	require.NoError(t, err)
	var modules []string
	for _, m := range info.Deps {
		modules = append(modules, m.Path)
		for _, foreign := range foreignModules {
			require.False(t, strings.HasPrefix(m.Path, foreign), "the API binary holds %s %s, which it does not use", m.Path, m.Version)
		}
	}
	require.Contains(t, modules, "github.com/jackc/pgx/v5")
	require.Contains(t, modules, "modernc.org/sqlite")
	t.Logf("%d modules in the API binary", len(modules))

	// This test's binary links what main links: the drivers registered
	// with database/sql are the two the API opens.
	require.ElementsMatch(t, []string{"pgx", "pgx/v5", "sqlite"}, sql.Drivers())
}
