package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/migrations"
)

// DefaultPostgresURL is where the tests find PostgreSQL when
// TEST_DATABASE_URL is not set; each test gets a schema of its own there.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Dialects lists the dialects a contract test should run on.
var Dialects = []database.Dialect{database.Postgres, database.SQLite}

// PostgresURL returns the server URL the tests use.
func PostgresURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// OpenDB returns a migrated, empty database of the given dialect that lives
// as long as the test.
func OpenDB(t testing.TB, dialect database.Dialect) *database.DB {
	t.Helper()
	url := DatabaseURL(t, dialect)
	db, err := database.Open(url, database.Options{MaxOpenConns: 10})
	if err != nil {
		t.Fatalf("open %s: %v", dialect, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// DatabaseURL prepares a migrated, empty database that lives as long as the
// test and returns how to reach it: a postgres:// URL whose search_path is a
// fresh schema, or "sqlite:<path>" for a file in the test's temporary
// folder. The schema is dropped when the test ends.
func DatabaseURL(t testing.TB, dialect database.Dialect) string {
	t.Helper()
	url, drop := newDatabase(t, dialect)
	t.Cleanup(drop)
	return url
}

func newDatabase(t testing.TB, dialect database.Dialect) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch dialect {
	case database.SQLite:
		path := filepath.Join(t.TempDir(), "test.db")
		db, err := database.Open("sqlite:"+path, database.Options{})
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		defer db.Close()
		sqlDB, _ := db.DB.DB()
		if _, err := migrations.Up(ctx, sqlDB, string(database.SQLite)); err != nil {
			t.Fatalf("migrate sqlite: %v", err)
		}
		return "sqlite:" + path, func() {}
	case database.Postgres:
		base := PostgresURL()
		admin, err := database.Open(base, database.Options{MaxOpenConns: 2})
		if err == nil {
			err = admin.Ping(ctx)
		}
		if err != nil {
			MissingService(t, "PostgreSQL", err)
		}
		schema := "t_" + randomHex(6)
		if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
			t.Fatalf("create schema: %v", err)
		}
		// The base URL may list several hosts (a primary and its standbys):
		// WithQuery keeps them as written.
		schemaURL, err := WithQuery(base, "search_path", schema)
		if err != nil {
			t.Fatal(err)
		}
		db, err := database.Open(schemaURL, database.Options{MaxOpenConns: 2})
		if err != nil {
			t.Fatalf("open schema: %v", err)
		}
		sqlDB, _ := db.DB.DB()
		if _, err := migrations.Up(ctx, sqlDB, string(database.Postgres)); err != nil {
			t.Fatalf("migrate postgres: %v", err)
		}
		_ = db.Close()
		return schemaURL, func() {
			_ = admin.Exec("DROP SCHEMA " + schema + " CASCADE").Error
			_ = admin.Close()
		}
	}
	t.Fatalf("unknown dialect %q", dialect)
	return "", nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Count runs a query that selects one number (SELECT count(*) ...) in the
// database at url, through a connection of its own.
func Count(t testing.TB, url, query string, args ...any) int64 {
	t.Helper()
	return queryOne[int64](t, url, query, args...)
}

// Text runs a query that selects one text value in the database at url.
func Text(t testing.TB, url, query string, args ...any) string {
	t.Helper()
	return queryOne[string](t, url, query, args...)
}

func queryOne[T any](t testing.TB, url, query string, args ...any) T {
	t.Helper()
	db, err := database.Open(url, database.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	defer db.Close()
	var v T
	if err := dbtx.ScanRow(db.Raw(query, args...), &v); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}
