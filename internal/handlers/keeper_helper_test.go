package handlers_test

import (
	"log/slog"
	"testing"

	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/localcache"
)

// newIdempotency wires the idempotency layer as the API does (its error
// table, the merchant as scope) over db, for the tests' routers.
func newIdempotency(t *testing.T, db *gorm.DB, cfg idempotency.Config, log *slog.Logger) (*idempotency.Keeper, *ginidem.Middleware, *gormstore.Store) {
	t.Helper()
	store := gormstore.New(db, gormstore.WithClassify(database.Classify))
	cfg.Transactor, cfg.Log = store, log
	if cfg.Cache == nil {
		cfg.Cache = localcache.New(localcache.DefaultSize, nil) // as the API wires it
	}
	keeper := idempotency.New(store, cfg)
	return keeper, ginidem.New(keeper, ginidem.Options{Scope: handlers.MerchantID, Answer: handlers.ErrorAnswer}), store
}
