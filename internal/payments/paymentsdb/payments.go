package paymentsdb

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/payments"
)

type paymentRow struct {
	MerchantID       string    `gorm:"column:merchant_id;primaryKey"`
	ID               string    `gorm:"column:id;primaryKey"`
	OrderID          string    `gorm:"column:order_id"`
	Amount           int64     `gorm:"column:amount"`
	Currency         string    `gorm:"column:currency"`
	PaymentMethod    string    `gorm:"column:payment_method"`
	Status           string    `gorm:"column:status"`
	ProviderKey      string    `gorm:"column:provider_key"`
	ProviderChargeID *string   `gorm:"column:provider_charge_id"`
	DeclineCode      *string   `gorm:"column:decline_code"`
	AmountRefunded   int64     `gorm:"column:amount_refunded"`
	IdempotencyKey   string    `gorm:"column:idempotency_key"`
	TraceParent      string    `gorm:"column:trace_parent"`
	LastAttemptAt    time.Time `gorm:"column:last_attempt_at"`
	CreatedAt        time.Time `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt        time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// TableName tells GORM the table, which the migrations own.
func (paymentRow) TableName() string { return "payments" }

type refundRow struct {
	MerchantID       string    `gorm:"column:merchant_id;primaryKey"`
	ID               string    `gorm:"column:id;primaryKey"`
	PaymentID        string    `gorm:"column:payment_id"`
	Amount           int64     `gorm:"column:amount"`
	Currency         string    `gorm:"column:currency"`
	Status           string    `gorm:"column:status"`
	ProviderKey      string    `gorm:"column:provider_key"`
	ProviderRefundID *string   `gorm:"column:provider_refund_id"`
	IdempotencyKey   string    `gorm:"column:idempotency_key"`
	TraceParent      string    `gorm:"column:trace_parent"`
	LastAttemptAt    time.Time `gorm:"column:last_attempt_at"`
	CreatedAt        time.Time `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt        time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// TableName tells GORM the table, which the migrations own.
func (refundRow) TableName() string { return "refunds" }

// InTx implements PaymentStore.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return database.Transaction(ctx, s.db, fn)
}

// forUpdate locks the selected rows on PostgreSQL. SQLite has no row locks;
// its transactions take the write lock at BEGIN (database.Open), which
// serialises them instead.
func (s *Store) forUpdate(q *gorm.DB) *gorm.DB {
	if q.Name() == "postgres" {
		return q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	return q
}

// LockOrder implements PaymentStore.
func (s *Store) LockOrder(ctx context.Context, merchantID, id string) (payments.Order, error) {
	row, err := takeRow[orderRow](s.forUpdate(dbtx.Conn(ctx, s.db)).Where("merchant_id = ? AND id = ?", merchantID, id))
	if err != nil {
		return payments.Order{}, err
	}
	return toDomainOrder(row)
}

// MarkOrderPaid implements PaymentStore.
func (s *Store) MarkOrderPaid(ctx context.Context, merchantID, id string, now time.Time) error {
	return database.Classify(dbtx.Conn(ctx, s.db).Exec(`
UPDATE orders SET status = ?, version = version + 1, updated_at = ?
WHERE merchant_id = ? AND id = ? AND status = ?`,
		string(payments.OrderPaid), now, merchantID, id, string(payments.OrderPendingPayment)).Error)
}

// CreatePayment implements PaymentStore. The partial unique index
// payments_one_active_per_order turns a second active payment into
// ErrPaymentInProgress, whatever raced.
func (s *Store) CreatePayment(ctx context.Context, p payments.Payment) error {
	row := toPaymentRow(p)
	err := dbtx.Conn(ctx, s.db).Create(&row).Error
	if database.IsUniqueViolation(err) {
		return payments.ErrPaymentInProgress
	}
	return database.Classify(err)
}

// GetPayment implements PaymentStore.
func (s *Store) GetPayment(ctx context.Context, merchantID, id string) (payments.Payment, error) {
	return takeAs(dbtx.Conn(ctx, s.db).Where("merchant_id = ? AND id = ?", merchantID, id), toDomainPayment)
}

// LockPayment implements PaymentStore.
func (s *Store) LockPayment(ctx context.Context, merchantID, id string) (payments.Payment, error) {
	return takeAs(s.forUpdate(dbtx.Conn(ctx, s.db)).Where("merchant_id = ? AND id = ?", merchantID, id), toDomainPayment)
}

// FindPayment implements PaymentStore.
func (s *Store) FindPayment(ctx context.Context, id string) (payments.Payment, error) {
	return takeAs(dbtx.Conn(ctx, s.db).Where("id = ?", id), toDomainPayment)
}

// takeAs reads the one row q selects, as the domain's type (to).
func takeAs[Row, T any](q *gorm.DB, to func(Row) T) (T, error) {
	row, err := takeRow[Row](q)
	if err != nil {
		var zero T
		return zero, err
	}
	return to(row), nil
}

// takeRow reads the one row q selects. It returns payments.ErrNotFound
// when there is none, or the database's error classified.
func takeRow[Row any](q *gorm.DB) (Row, error) {
	var row Row
	err := q.Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return row, payments.ErrNotFound
	case err != nil:
		return row, database.Classify(err)
	}
	return row, nil
}

// MovePayment implements PaymentStore. The status condition is what keeps
// late or repeated news from moving a payment backwards.
func (s *Store) MovePayment(ctx context.Context, p payments.Payment, from ...payments.Status) (bool, error) {
	return s.execOne(ctx, `
UPDATE payments SET status = ?, provider_charge_id = ?, decline_code = ?, updated_at = ?
WHERE merchant_id = ? AND id = ? AND status IN ?`,
		string(p.Status), nullable(p.ProviderChargeID), nullable(p.DeclineCode), p.UpdatedAt,
		p.MerchantID, p.ID, statusStrings(from))
}

// LockRefund implements PaymentStore.
func (s *Store) LockRefund(ctx context.Context, merchantID, id string) (payments.Refund, error) {
	return takeAs(s.forUpdate(dbtx.Conn(ctx, s.db)).Where("merchant_id = ? AND id = ?", merchantID, id), toDomainRefund)
}

// AddRefunded implements PaymentStore.
func (s *Store) AddRefunded(ctx context.Context, merchantID, paymentID string, amount int64, now time.Time) error {
	return database.Classify(dbtx.Conn(ctx, s.db).Exec(`
UPDATE payments SET amount_refunded = amount_refunded + ?, updated_at = ?
WHERE merchant_id = ? AND id = ?`, amount, now, merchantID, paymentID).Error)
}

// CreateRefund implements PaymentStore.
func (s *Store) CreateRefund(ctx context.Context, r payments.Refund) error {
	row := toRefundRow(r)
	return database.Classify(dbtx.Conn(ctx, s.db).Create(&row).Error)
}

// GetRefund implements PaymentStore.
func (s *Store) GetRefund(ctx context.Context, merchantID, id string) (payments.Refund, error) {
	return takeAs(dbtx.Conn(ctx, s.db).Where("merchant_id = ? AND id = ?", merchantID, id), toDomainRefund)
}

// FindRefund implements PaymentStore.
func (s *Store) FindRefund(ctx context.Context, id string) (payments.Refund, error) {
	return takeAs(dbtx.Conn(ctx, s.db).Where("id = ?", id), toDomainRefund)
}

// ReservedRefunds implements PaymentStore.
func (s *Store) ReservedRefunds(ctx context.Context, merchantID, paymentID string) (int64, error) {
	var sum int64
	err := dbtx.Conn(ctx, s.db).Raw(`
SELECT COALESCE(SUM(amount), 0) FROM refunds
WHERE merchant_id = ? AND payment_id = ? AND status NOT IN ('failed', 'canceled')`, merchantID, paymentID).Scan(&sum).Error
	return sum, database.Classify(err)
}

// MoveRefund implements PaymentStore.
func (s *Store) MoveRefund(ctx context.Context, r payments.Refund, from ...payments.Status) (bool, error) {
	return s.execOne(ctx, `
UPDATE refunds SET status = ?, provider_refund_id = ?, updated_at = ?
WHERE merchant_id = ? AND id = ? AND status IN ?`,
		string(r.Status), nullable(r.ProviderRefundID), r.UpdatedAt, r.MerchantID, r.ID, statusStrings(from))
}

// RecordEvent implements PaymentStore: insert-if-absent on the event id.
func (s *Store) RecordEvent(ctx context.Context, id, eventType string, now time.Time) (bool, error) {
	return s.execOne(ctx, `
INSERT INTO webhook_events (event_id, type, received_at) VALUES (?, ?, ?)
ON CONFLICT (event_id) DO NOTHING`,
		id, eventType, now)
}

// EventRecorded implements PaymentStore.
func (s *Store) EventRecorded(ctx context.Context, id string) (bool, error) {
	var n int64
	err := dbtx.Conn(ctx, s.db).Raw(`SELECT count(*) FROM webhook_events WHERE event_id = ?`, id).Scan(&n).Error
	return n > 0, database.Classify(err)
}

// PurgeWebhookEvents deletes at most limit inbox rows received before
// before, oldest first, and returns how many it deleted (the retention
// purge). An event redelivered after its row is gone is applied again,
// which asks the provider and changes nothing that is already settled; the
// retention must only outlast the provider's redelivery window for the
// inbox to keep saying "applied once". It returns an error wrapping
// database.ErrUnavailable when the database cannot answer.
func (s *Store) PurgeWebhookEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := dbtx.Purge(ctx, s.db, "webhook_events", "received_at < ?", "received_at", limit, before.UTC())
	return n, database.Classify(err)
}

func statusStrings(ss []payments.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func toPaymentRow(p payments.Payment) paymentRow {
	return paymentRow{
		MerchantID: p.MerchantID, ID: p.ID, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency,
		PaymentMethod: p.PaymentMethod, Status: string(p.Status), ProviderKey: p.ProviderKey,
		ProviderChargeID: nullable(p.ProviderChargeID), DeclineCode: nullable(p.DeclineCode),
		AmountRefunded: p.AmountRefunded, IdempotencyKey: p.IdempotencyKey, TraceParent: p.TraceParent,
		LastAttemptAt: p.LastAttemptAt, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
}

func toDomainPayment(r paymentRow) payments.Payment {
	return payments.Payment{
		ID: r.ID, MerchantID: r.MerchantID, OrderID: r.OrderID, Amount: r.Amount, Currency: r.Currency,
		PaymentMethod: r.PaymentMethod, Status: payments.Status(r.Status), ProviderKey: r.ProviderKey,
		ProviderChargeID: deref(r.ProviderChargeID), DeclineCode: deref(r.DeclineCode),
		AmountRefunded: r.AmountRefunded, IdempotencyKey: r.IdempotencyKey, TraceParent: r.TraceParent,
		LastAttemptAt: r.LastAttemptAt.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

func toRefundRow(r payments.Refund) refundRow {
	return refundRow{
		MerchantID: r.MerchantID, ID: r.ID, PaymentID: r.PaymentID, Amount: r.Amount, Currency: r.Currency,
		Status: string(r.Status), ProviderKey: r.ProviderKey, ProviderRefundID: nullable(r.ProviderRefundID),
		IdempotencyKey: r.IdempotencyKey, TraceParent: r.TraceParent, LastAttemptAt: r.LastAttemptAt,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

func toDomainRefund(r refundRow) payments.Refund {
	return payments.Refund{
		ID: r.ID, MerchantID: r.MerchantID, PaymentID: r.PaymentID, Amount: r.Amount, Currency: r.Currency,
		Status: payments.Status(r.Status), ProviderKey: r.ProviderKey, ProviderRefundID: deref(r.ProviderRefundID),
		IdempotencyKey: r.IdempotencyKey, TraceParent: r.TraceParent, LastAttemptAt: r.LastAttemptAt.UTC(),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// AppendEvent implements EventStore.
func (s *Store) AppendEvent(ctx context.Context, ev payments.Event) error {
	// Deferred with the business write it belongs to (database.Exec): the
	// event id is made in Go, so the insert cannot clash.
	// The arguments point into one value, as CreateOrder's do; the payload
	// stays a string, which pgx sends as JSON text.
	a := &struct {
		merchant, id, typ, traceParent pgtype.Text
		created                        pgtype.Timestamptz
		list                           [6]any
	}{merchant: dbtx.String(ev.MerchantID), id: dbtx.String(ev.ID), typ: dbtx.String(ev.Type), traceParent: dbtx.String(ev.TraceParent),
		created: dbtx.Timestamp(ev.CreatedAt)}
	a.list = [...]any{&a.merchant, &a.id, &a.typ, string(ev.Payload), &a.traceParent, &a.created}
	return database.Exec(ctx, s.db, `INSERT INTO outbox_events (merchant_id, id, type, payload, trace_parent, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		a.list[:]...)
}

// execOne runs a statement that changes at most one row and reports
// whether it did: the conditional moves and the inbox's insert-if-absent.
func (s *Store) execOne(ctx context.Context, query string, args ...any) (bool, error) {
	res := dbtx.Conn(ctx, s.db).Exec(query, args...)
	if res.Error != nil {
		return false, database.Classify(res.Error)
	}
	return res.RowsAffected == 1, nil
}

// WithoutEvents implements EventGaps: up to limit payments and up to limit
// refunds that reached a final state at or after since and whose outbox has
// no event of that state naming them, the oldest first.
func (s *Store) WithoutEvents(ctx context.Context, since time.Time, limit int) ([]payments.Payment, []payments.Refund, error) {
	id := `json_extract(e.payload, '$.id')`
	if s.db.Name() == "postgres" {
		id = `e.payload->>'id'`
	}
	missing := func(table, kind, statuses string) string {
		return `SELECT * FROM ` + table + ` t WHERE t.status IN (` + statuses + `) AND t.updated_at >= ?
AND NOT EXISTS (SELECT 1 FROM outbox_events e WHERE e.merchant_id = t.merchant_id
    AND e.type = '` + kind + `.' || t.status AND ` + id + ` = t.id)
ORDER BY t.updated_at, t.id LIMIT ` + strconv.Itoa(limit)
	}
	var prows []paymentRow
	if err := dbtx.Conn(ctx, s.db).Raw(missing("payments", "payment", "'succeeded', 'failed', 'canceled'"), since).Scan(&prows).Error; err != nil {
		return nil, nil, database.Classify(err)
	}
	var rrows []refundRow
	if err := dbtx.Conn(ctx, s.db).Raw(missing("refunds", "refund", "'succeeded', 'canceled'"), since).Scan(&rrows).Error; err != nil {
		return nil, nil, database.Classify(err)
	}
	ps := make([]payments.Payment, len(prows))
	for i, r := range prows {
		ps[i] = toDomainPayment(r)
	}
	rs := make([]payments.Refund, len(rrows))
	for i, r := range rrows {
		rs[i] = toDomainRefund(r)
	}
	return ps, rs, nil
}
