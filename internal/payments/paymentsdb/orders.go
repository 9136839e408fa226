package paymentsdb

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/payments"
)

// Store implements the payments domain's store interfaces (payments.Store,
// PaymentStore, EventStore, CustomerStore, OrderChangeStore) on the
// database.
type Store struct {
	db *gorm.DB
}

// New returns a Store over db. db must not be a transaction: the
// transaction of a request travels in its context instead.
func New(db *gorm.DB) *Store {
	return &Store{db: db}
}

// orderRow is one row of the orders table. Items and metadata are JSON
// text: JSONB on PostgreSQL, TEXT on SQLite. A string parameter fits both,
// and keeps the insert a single statement (no child table of items).
type orderRow struct {
	MerchantID  string `gorm:"column:merchant_id;primaryKey"`
	ID          string `gorm:"column:id;primaryKey"`
	CustomerID  string `gorm:"column:customer_id"`
	Currency    string `gorm:"column:currency"`
	Items       string `gorm:"column:items"`
	Metadata    string `gorm:"column:metadata"`
	AmountTotal int64  `gorm:"column:amount_total"`
	Status      string `gorm:"column:status"`
	Version     int64  `gorm:"column:version"`
	// ShippingAddress is JSON text like Items; NULL until one is set.
	ShippingAddress *string `gorm:"column:shipping_address"`
	// autoCreateTime/autoUpdateTime are off: the Service's clock decides,
	// so what the client is shown is what is stored.
	CreatedAt time.Time `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// TableName tells GORM the table, which the migrations own.
func (orderRow) TableName() string { return "orders" }

// itemJSON is how one item is spelled inside the items column. It has
// Item's fields, so the two convert into each other; a field added to one
// and not the other stops the build instead of dropping data.
type itemJSON struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	Quantity   int64  `json:"quantity"`
	UnitAmount int64  `json:"unit_amount"`
}

// CreateOrder inserts o with one INSERT, written out rather than built by
// GORM: every column comes from o, and the id is made in Go, so its only
// possible failures are the request's. Inside the idempotency transaction
// on PostgreSQL it is deferred and sent with the record at the commit
// (database.Exec).
func (s *Store) CreateOrder(ctx context.Context, o payments.Order) error {
	row, err := toOrderRow(o)
	if err != nil {
		return err
	}
	// The arguments point into one value, their list too, as in
	// gormstore's Insert (each boxed by itself would be an allocation);
	// the JSON columns stay strings, which pgx sends as JSON text.
	a := &struct {
		merchant, id, customer, currency, status pgtype.Text
		amount                                   pgtype.Int8
		created, updated                         pgtype.Timestamptz
		list                                     [12]any
	}{merchant: dbtx.String(row.MerchantID), id: dbtx.String(row.ID), customer: dbtx.String(row.CustomerID),
		currency: dbtx.String(row.Currency), status: dbtx.String(row.Status), amount: pgtype.Int8{Int64: row.AmountTotal, Valid: true},
		created: dbtx.Timestamp(row.CreatedAt), updated: dbtx.Timestamp(row.UpdatedAt)}
	a.list = [...]any{&a.merchant, &a.id, &a.customer, &a.currency, row.Items, row.Metadata, &a.amount, &a.status,
		row.Version, row.ShippingAddress, &a.created, &a.updated}
	return database.Exec(ctx, s.db, `INSERT INTO orders (merchant_id, id, customer_id, currency, items, metadata, amount_total, status, version,
    shipping_address, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, a.list[:]...)
}

// GetOrder implements Store.
func (s *Store) GetOrder(ctx context.Context, merchantID, id string) (payments.Order, error) {
	row, err := takeRow[orderRow](dbtx.Conn(ctx, s.db).Where("merchant_id = ? AND id = ?", merchantID, id))
	if err != nil {
		return payments.Order{}, err
	}
	return toDomainOrder(row)
}

// ListOrders implements Store. Ids are ULIDs, so "id DESC" is newest first
// and "id < cursor" is the next page; the primary key (merchant_id, id), or
// orders_customer with a customer filter, serves both without a sort.
func (s *Store) ListOrders(ctx context.Context, merchantID string, f payments.OrderFilter) ([]payments.Order, error) {
	q := dbtx.Conn(ctx, s.db).Where("merchant_id = ?", merchantID)
	if f.CustomerID != "" {
		q = q.Where("customer_id = ?", f.CustomerID)
	}
	if f.BeforeID != "" {
		q = q.Where("id < ?", f.BeforeID)
	}
	var rows []orderRow
	if err := q.Order("id DESC").Limit(f.Limit).Find(&rows).Error; err != nil {
		return nil, database.Classify(err)
	}
	orders := make([]payments.Order, 0, len(rows))
	for _, row := range rows {
		o, err := toDomainOrder(row)
		if err != nil {
			return nil, err
		}
		orders = append(orders, o)
	}
	return orders, nil
}

func toOrderRow(o payments.Order) (orderRow, error) {
	items := make([]itemJSON, len(o.Items))
	for i, it := range o.Items {
		items[i] = itemJSON(it)
	}
	itemsText, err := json.Marshal(items)
	if err != nil {
		return orderRow{}, fmt.Errorf("encode items of order %s: %w", o.ID, err)
	}
	metadata := o.Metadata
	if metadata == nil {
		metadata = map[string]string{}
	}
	metadataText, err := json.Marshal(metadata)
	if err != nil {
		return orderRow{}, fmt.Errorf("encode metadata of order %s: %w", o.ID, err)
	}
	row := orderRow{
		MerchantID:  o.MerchantID,
		ID:          o.ID,
		CustomerID:  o.CustomerID,
		Currency:    o.Currency,
		Items:       string(itemsText),
		Metadata:    string(metadataText),
		AmountTotal: o.AmountTotal,
		Status:      string(o.Status),
		Version:     o.Version,
		CreatedAt:   o.CreatedAt,
		UpdatedAt:   o.UpdatedAt,
	}
	if o.ShippingAddress != nil {
		text, err := encodeAddress(*o.ShippingAddress)
		if err != nil {
			return orderRow{}, fmt.Errorf("encode shipping address of order %s: %w", o.ID, err)
		}
		row.ShippingAddress = &text
	}
	return row, nil
}

func toDomainOrder(row orderRow) (payments.Order, error) {
	var items []itemJSON
	if err := json.Unmarshal([]byte(row.Items), &items); err != nil {
		return payments.Order{}, fmt.Errorf("decode items of order %s: %w", row.ID, err)
	}
	var metadata map[string]string
	if err := json.Unmarshal([]byte(row.Metadata), &metadata); err != nil {
		return payments.Order{}, fmt.Errorf("decode metadata of order %s: %w", row.ID, err)
	}
	if metadata == nil {
		metadata = map[string]string{}
	}
	o := payments.Order{
		ID:          row.ID,
		MerchantID:  row.MerchantID,
		CustomerID:  row.CustomerID,
		Currency:    row.Currency,
		Items:       make([]payments.Item, len(items)),
		AmountTotal: row.AmountTotal,
		Status:      payments.OrderStatus(row.Status),
		Metadata:    metadata,
		Version:     row.Version,
		// The PostgreSQL driver hands back local time; the domain is UTC.
		CreatedAt: row.CreatedAt.UTC(),
		UpdatedAt: row.UpdatedAt.UTC(),
	}
	for i, it := range items {
		o.Items[i] = payments.Item(it)
	}
	if row.ShippingAddress != nil {
		var a addressJSON
		if err := json.Unmarshal([]byte(*row.ShippingAddress), &a); err != nil {
			return payments.Order{}, fmt.Errorf("decode shipping address of order %s: %w", row.ID, err)
		}
		address := payments.ShippingAddress(a)
		o.ShippingAddress = &address
	}
	return o, nil
}

// addressJSON is how a shipping address is spelled inside the
// shipping_address column. It has ShippingAddress's fields, so the two
// convert into each other, like itemJSON and Item.
type addressJSON struct {
	Name       string `json:"name"`
	Line1      string `json:"line1"`
	Line2      string `json:"line2"`
	City       string `json:"city"`
	PostalCode string `json:"postal_code"`
	Country    string `json:"country"`
}

func encodeAddress(a payments.ShippingAddress) (string, error) {
	text, err := json.Marshal(addressJSON(a))
	return string(text), err
}

func encodeItems(items []payments.Item) (string, error) {
	out := make([]itemJSON, len(items))
	for i, it := range items {
		out[i] = itemJSON(it)
	}
	text, err := json.Marshal(out)
	return string(text), err
}

// Store implements every store interface of the domain. The Service finds
// OrderChangeStore by a type assertion at run time; this makes losing it
// (or any other) a build error instead.
var (
	_ payments.Store            = (*Store)(nil)
	_ payments.PaymentStore     = (*Store)(nil)
	_ payments.EventStore       = (*Store)(nil)
	_ payments.CustomerStore    = (*Store)(nil)
	_ payments.OrderChangeStore = (*Store)(nil)
)

// SetShippingAddress implements OrderChangeStore. The address is replaced
// whole, so nothing read earlier is written back and no update can be lost;
// the version condition is added only for a caller that asked for one.
// RETURNING hands back the row as this UPDATE left it, the version it
// bumped included, without a second read that could see a later write.
func (s *Store) SetShippingAddress(ctx context.Context, merchantID, id string, addr payments.ShippingAddress, version int64, now time.Time) (payments.Order, bool, error) {
	text, err := encodeAddress(addr)
	if err != nil {
		return payments.Order{}, false, fmt.Errorf("encode shipping address of order %s: %w", id, err)
	}
	query := `UPDATE orders SET shipping_address = ?, version = version + 1, updated_at = ?
WHERE merchant_id = ? AND id = ? AND status = ?`
	args := []any{text, now, merchantID, id, string(payments.OrderPendingPayment)}
	if version != 0 {
		query += ` AND version = ?`
		args = append(args, version)
	}
	return s.updateOrder(ctx, query+` RETURNING *`, args...)
}

// SetItems implements OrderChangeStore. The NOT EXISTS runs on the partial
// unique index payments_one_active_per_order, the same one that keeps an
// order to one active payment.
func (s *Store) SetItems(ctx context.Context, merchantID, id string, items []payments.Item, amountTotal, version int64, now time.Time) (payments.Order, bool, error) {
	text, err := encodeItems(items)
	if err != nil {
		return payments.Order{}, false, fmt.Errorf("encode items of order %s: %w", id, err)
	}
	return s.updateOrder(ctx, `UPDATE orders SET items = ?, amount_total = ?, version = version + 1, updated_at = ?
WHERE merchant_id = ? AND id = ? AND version = ? AND status = ?
  AND NOT EXISTS (SELECT 1 FROM payments p
                  WHERE p.merchant_id = orders.merchant_id AND p.order_id = orders.id
                    AND p.status IN ?)
RETURNING *`,
		text, amountTotal, now, merchantID, id, version, string(payments.OrderPendingPayment),
		statusStrings([]payments.Status{payments.StatusPending, payments.StatusProcessing, payments.StatusSucceeded}))
}

// updateOrder runs an UPDATE ... RETURNING * on orders and reports whether
// it changed a row.
func (s *Store) updateOrder(ctx context.Context, query string, args ...any) (payments.Order, bool, error) {
	var rows []orderRow
	if err := dbtx.Conn(ctx, s.db).Raw(query, args...).Scan(&rows).Error; err != nil {
		return payments.Order{}, false, database.Classify(err)
	}
	if len(rows) == 0 {
		return payments.Order{}, false, nil
	}
	o, err := toDomainOrder(rows[0])
	return o, err == nil, err
}
