package gormstore

import (
	"embed"
	"fmt"
)

//go:embed schema/*.sql
var schemaFiles embed.FS

// Schema returns the SQL that creates the idempotency_records table and its
// indexes for dialect ("postgres" or "sqlite"), idempotently (IF NOT
// EXISTS), for a service that starts without migrations of its own. A
// service with migrations copies it into one. This project's migrations
// build the same table; a test holds the two together.
func Schema(dialect string) (string, error) {
	b, err := schemaFiles.ReadFile("schema/" + dialect + ".sql")
	if err != nil {
		return "", fmt.Errorf("gormstore: no schema for dialect %q (postgres or sqlite)", dialect)
	}
	return string(b), nil
}
