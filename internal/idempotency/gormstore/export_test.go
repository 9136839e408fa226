package gormstore

import (
	"context"

	"gorm.io/gorm"
)

// DeleteExpired is the statement PurgeExpired runs, for the tests that
// read its plan.
func (s *Store) DeleteExpired(limit int) string { return s.deleteExpired(limit) }

// WithTx returns a context that carries tx, begun already: Conn picks it
// up, so a test can hold a row lock in a transaction of its own.
func WithTx(ctx context.Context, tx *gorm.DB) context.Context {
	return context.WithValue(ctx, txKey{}, &unit{tx: tx})
}
