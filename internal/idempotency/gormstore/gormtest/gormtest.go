// Package gormtest gives a test an empty database of its own with the
// idempotency_records table (gormstore.Schema): a fresh PostgreSQL schema,
// or a fresh SQLite file, dropped when the test ends. It belongs to the
// library, not to the application, so that the store's tests (and a fork's)
// need nothing else.
//
// PostgreSQL is found at TEST_DATABASE_URL (default: the local server,
// database "test"). When it cannot be reached the test is skipped with a
// line starting "SKIPPED:", except under CI=true, where it fails.
package gormtest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idemkeys/payments/internal/idempotency/gormstore"
)

// Dialects are the dialects the store runs on.
var Dialects = []string{"postgres", "sqlite"}

// DefaultPostgresURL is used when TEST_DATABASE_URL is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Open returns a database of dialect holding the empty idempotency table,
// plus whatever extra statements the test needs (its own tables), for as
// long as the test runs.
func Open(t testing.TB, dialect string, extra ...string) *gorm.DB {
	t.Helper()
	cfg := &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true}
	var db *gorm.DB
	switch dialect {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "idempotency.db")
		var err error
		db, err = gorm.Open(sqlite.Open("file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate"), cfg)
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		sqlDB, _ := db.DB()
		sqlDB.SetMaxOpenConns(4)
	case "postgres":
		base := os.Getenv("TEST_DATABASE_URL")
		if base == "" {
			base = DefaultPostgresURL
		}
		admin, err := gorm.Open(postgres.Open(base), cfg)
		if err == nil {
			err = admin.Exec("SELECT 1").Error
		}
		if err != nil {
			missing(t, err)
		}
		schema := "idem_" + randomHex(6)
		if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
			t.Fatalf("create schema: %v", err)
		}
		t.Cleanup(func() {
			_ = admin.Exec("DROP SCHEMA " + schema + " CASCADE").Error
			if sqlDB, err := admin.DB(); err == nil {
				_ = sqlDB.Close()
			}
		})
		u, err := url.Parse(base)
		if err != nil {
			t.Fatalf("parse %s: %v", base, err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		if db, err = gorm.Open(postgres.Open(u.String()), cfg); err != nil {
			t.Fatalf("open schema: %v", err)
		}
	default:
		t.Fatalf("gormtest: unknown dialect %q", dialect)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	ddl, err := gormstore.Schema(dialect)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range append([]string{ddl}, extra...) {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatalf("schema: %v", err)
		}
	}
	return db
}

func missing(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("PostgreSQL is required under CI=true but is not reachable: %v", err)
	}
	t.Skipf("SKIPPED: PostgreSQL is not reachable (%v); start it or set CI=true to make this a failure", err)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Plan is the top of a PostgreSQL plan: the nodes right under the
// statement's own node, by their relation to it ("Outer", "InitPlan", …):
// their node types.
type Plan struct {
	Mode     string // the plan_cache_mode it was made under
	Children map[string]string
	JSON     string
}

// Explain returns the two plans PostgreSQL may run stmt with: the custom
// plan, made for these arguments, and the generic plan a prepared statement
// may keep whatever its arguments, as EXPLAIN (FORMAT JSON) gives them, in
// a transaction that changes nothing.
func Explain(t testing.TB, db *gorm.DB, stmt string, args ...any) []Plan {
	t.Helper()
	var plans []Plan
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		p := Plan{Mode: mode}
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec(`SET LOCAL plan_cache_mode = ` + mode).Error; err != nil {
				return err
			}
			return tx.Raw(`EXPLAIN (FORMAT JSON) `+stmt, args...).Row().Scan(&p.JSON)
		})
		if err != nil {
			t.Fatalf("explain: %v", err)
		}
		type node struct {
			NodeType     string `json:"Node Type"`
			Relationship string `json:"Parent Relationship"`
			Plans        []node `json:"Plans"`
		}
		var out []struct{ Plan node }
		if err := json.Unmarshal([]byte(p.JSON), &out); err != nil || len(out) != 1 {
			t.Fatalf("explain: %v in %s", err, p.JSON)
		}
		p.Children = map[string]string{}
		for _, c := range out[0].Plan.Plans {
			p.Children[c.Relationship] = c.NodeType
		}
		plans = append(plans, p)
	}
	return plans
}
