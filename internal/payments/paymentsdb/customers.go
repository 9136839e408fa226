package paymentsdb

import (
	"context"
	"time"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/payments"
)

// customerRow is one row of the customers table.
type customerRow struct {
	MerchantID string    `gorm:"column:merchant_id;primaryKey"`
	ID         string    `gorm:"column:id;primaryKey"`
	Email      string    `gorm:"column:email"`
	Name       string    `gorm:"column:name"`
	CreatedAt  time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName tells GORM the table, which the migrations own.
func (customerRow) TableName() string { return "customers" }

// CreateCustomer implements CustomerStore. The unique index on (merchant_id,
// email) decides a clash. On PostgreSQL the failed insert aborts the
// transaction it ran in; the idempotency layer then stores the 409 after a
// rollback, so nothing more is written into it.
func (s *Store) CreateCustomer(ctx context.Context, c payments.Customer) error {
	row := customerRow{MerchantID: c.MerchantID, ID: c.ID, Email: c.Email, Name: c.Name, CreatedAt: c.CreatedAt}
	err := dbtx.Conn(ctx, s.db).Create(&row).Error
	if database.IsUniqueViolation(err) {
		return payments.ErrCustomerExists
	}
	return database.Classify(err)
}

// GetCustomer implements CustomerStore.
func (s *Store) GetCustomer(ctx context.Context, merchantID, id string) (payments.Customer, error) {
	var rows []customerRow
	err := dbtx.Conn(ctx, s.db).Where("merchant_id = ? AND id = ?", merchantID, id).Limit(1).Find(&rows).Error
	if err != nil {
		return payments.Customer{}, database.Classify(err)
	}
	if len(rows) == 0 {
		return payments.Customer{}, payments.ErrNotFound
	}
	r := rows[0]
	return payments.Customer{ID: r.ID, MerchantID: r.MerchantID, Email: r.Email, Name: r.Name, CreatedAt: r.CreatedAt.UTC()}, nil
}
