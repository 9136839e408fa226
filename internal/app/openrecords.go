package app

import (
	"context"
	"time"

	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/payments"
)

// unlockedRecords is the part of *gormstore.Store openRecords uses.
type unlockedRecords interface {
	// Unlocked lists open records whose lock ran out; it returns a store
	// error.
	Unlocked(ctx context.Context, now time.Time, limit int) ([]gormstore.OpenRecord, error)
}

// openRecords shows the reconciler the idempotency records that were left
// open with something durable behind them (payments.OpenOperations), so
// that an operation which settled but whose answer was never stored gets
// it stored, through the RecordFinisher, even if its client never retries.
type openRecords struct {
	records unlockedRecords
	now     func() time.Time
}

var _ payments.OpenOperations = (*openRecords)(nil)

// newOpenRecords lists open records from store.
func newOpenRecords(store *gormstore.Store) *openRecords {
	return &openRecords{records: store, now: time.Now}
}

// Abandoned implements payments.OpenOperations.
func (o *openRecords) Abandoned(ctx context.Context, limit int) ([]payments.OpenOperation, error) {
	recs, err := o.records.Unlocked(ctx, o.now(), limit)
	if err != nil {
		return nil, err
	}
	ops := make([]payments.OpenOperation, len(recs))
	for i, r := range recs {
		ops[i] = payments.OpenOperation{MerchantID: r.Scope, ResourceID: r.Point.Resource}
	}
	return ops, nil
}
