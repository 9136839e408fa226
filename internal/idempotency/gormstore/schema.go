package gormstore

import (
	"embed"
	"fmt"
)

//go:embed schema/*.sql
var schemaFiles embed.FS

// Schema returns the SQL that creates the core's tables (idempotency_records,
// idempotency_tombstones, outside_calls) and their indexes for dialect
// ("postgres" or "sqlite"), idempotently (IF NOT EXISTS), for a service
// that starts without migrations of its own. A service with migrations
// copies it into one. This project's migrations build the same tables;
// TestLibrarySchemaMatchesTheMigrations (internal/database) holds the two
// together, column for column.
func Schema(dialect string) (string, error) {
	b, err := schemaFiles.ReadFile("schema/" + dialect + ".sql")
	if err != nil {
		return "", fmt.Errorf("gormstore: no schema for dialect %q (postgres or sqlite)", dialect)
	}
	return string(b), nil
}
