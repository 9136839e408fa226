package paymentsdb

import (
	"context"
	"time"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/payments"
)

type orphanRow struct {
	MerchantID       string    `gorm:"column:merchant_id;primaryKey"`
	ID               string    `gorm:"column:id;primaryKey"`
	Kind             string    `gorm:"column:kind"`
	ResourceID       string    `gorm:"column:resource_id"`
	ProviderID       string    `gorm:"column:provider_id"`
	Amount           int64     `gorm:"column:amount"`
	Currency         string    `gorm:"column:currency"`
	Status           string    `gorm:"column:status"`
	ProviderKey      string    `gorm:"column:provider_key"`
	ProviderRefundID string    `gorm:"column:provider_refund_id"`
	Note             string    `gorm:"column:note"`
	CreatedAt        time.Time `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt        time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// TableName tells GORM the table, which the migrations own.
func (orphanRow) TableName() string { return "orphans" }

// CreateOrphan implements PaymentStore: insert-if-absent on the provider's
// id, so an orphan found twice is one row.
func (s *Store) CreateOrphan(ctx context.Context, o payments.Orphan) (bool, error) {
	return s.execOne(ctx, `
INSERT INTO orphans (merchant_id, id, kind, resource_id, provider_id, amount, currency, status, provider_key,
    provider_refund_id, note, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (kind, provider_id) DO NOTHING`,
		o.MerchantID, o.ID, o.Kind, o.ResourceID, o.ProviderID, o.Amount, o.Currency, string(o.Status), o.ProviderKey,
		o.ProviderRefundID, o.Note, o.CreatedAt, o.UpdatedAt)
}

// GetOrphan implements PaymentStore.
func (s *Store) GetOrphan(ctx context.Context, merchantID, id string) (payments.Orphan, error) {
	return takeAs(dbtx.Conn(ctx, s.db).Where("merchant_id = ? AND id = ?", merchantID, id), toDomainOrphan)
}

// SaveOrphan implements PaymentStore.
func (s *Store) SaveOrphan(ctx context.Context, o payments.Orphan) error {
	moved, err := s.execOne(ctx, `
UPDATE orphans SET status = ?, provider_refund_id = ?, note = ?, updated_at = ?
WHERE merchant_id = ? AND id = ?`,
		string(o.Status), o.ProviderRefundID, o.Note, o.UpdatedAt, o.MerchantID, o.ID)
	if err == nil && !moved {
		err = payments.ErrNotFound
	}
	return err
}

// Orphans returns the orphans in any of statuses (all when none), oldest
// first, at most limit: what api flagged lists.
func (s *Store) Orphans(ctx context.Context, limit int, statuses ...payments.OrphanStatus) ([]payments.Orphan, error) {
	q := dbtx.Conn(ctx, s.db).Order("created_at, id").Limit(limit)
	if len(statuses) > 0 {
		in := make([]string, len(statuses))
		for i, st := range statuses {
			in[i] = string(st)
		}
		q = q.Where("status IN ?", in)
	}
	var rows []orphanRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, database.Classify(err)
	}
	out := make([]payments.Orphan, len(rows))
	for i, r := range rows {
		out[i] = toDomainOrphan(r)
	}
	return out, nil
}

func toDomainOrphan(r orphanRow) payments.Orphan {
	return payments.Orphan{
		ID: r.ID, MerchantID: r.MerchantID, Kind: r.Kind, ResourceID: r.ResourceID, ProviderID: r.ProviderID,
		Amount: r.Amount, Currency: r.Currency, Status: payments.OrphanStatus(r.Status), ProviderKey: r.ProviderKey,
		ProviderRefundID: r.ProviderRefundID, Note: r.Note, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}
