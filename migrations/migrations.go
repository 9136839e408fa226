// Package migrations holds the versioned SQL schema, one set per dialect, and
// applies it with goose. The SQL is embedded, so the binary migrates from any
// working directory.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Up applies every pending migration of dialect ("postgres" or "sqlite") and
// returns how many it applied.
func Up(ctx context.Context, db *sql.DB, dialect string) (int, error) {
	p, err := provider(db, dialect)
	if err != nil {
		return 0, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return len(results), fmt.Errorf("apply migrations: %w", err)
	}
	return len(results), nil
}

// Version returns the schema version applied to db.
func Version(ctx context.Context, db *sql.DB, dialect string) (int64, error) {
	p, err := provider(db, dialect)
	if err != nil {
		return 0, err
	}
	return p.GetDBVersion(ctx)
}

func provider(db *sql.DB, dialect string) (*goose.Provider, error) {
	var gd goose.Dialect
	var opts []goose.ProviderOption
	switch dialect {
	case "postgres":
		gd = goose.DialectPostgres
		// Several API instances may start at once: an advisory lock held
		// for the migration run (start-up only, never in a request) lets
		// one of them migrate while the others wait.
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case "sqlite":
		gd = goose.DialectSQLite3
	default:
		return nil, fmt.Errorf("no migrations for dialect %q", dialect)
	}
	sub, err := fs.Sub(files, dialect)
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(gd, db, sub, opts...)
}
