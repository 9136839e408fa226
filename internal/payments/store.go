package payments

import (
	"context"
	"time"
)

// Store keeps the domain's records. The Service declares it because the
// Service is what consumes it; paymentsdb.Store is the implementation.
// Every method joins the transaction carried by ctx, if any (InTx, or the
// idempotency layer's), so a caller that owns a transaction decides when
// the writes become visible.
//
// Any method may also return an error wrapping database.ErrUnavailable when
// the database cannot be reached; nothing was written then.
type Store interface {
	// CreateOrder inserts o, in one statement.
	CreateOrder(ctx context.Context, o Order) error
	// GetOrder returns the merchant's order. It returns ErrNotFound when the
	// merchant has no order with that id.
	GetOrder(ctx context.Context, merchantID, id string) (Order, error)
	// ListOrders returns up to f.Limit of the merchant's orders matching f,
	// newest (highest id) first. An empty result is not an error.
	ListOrders(ctx context.Context, merchantID string, f OrderFilter) ([]Order, error)
}

// OrderFilter selects a page of orders for Store.ListOrders.
type OrderFilter struct {
	// Limit is the most rows to return; the caller asks for one more than
	// it shows to learn whether there is a next page.
	Limit int
	// BeforeID, when set, keeps only orders with a smaller id (older ones).
	BeforeID string
	// CustomerID, when set, keeps only that customer's orders.
	CustomerID string
}

// PaymentStore keeps payments, refunds and the webhook inbox. paymentsdb.Store
// implements it beside Store. Errors as for Store, plus those listed.
type PaymentStore interface {
	// InTx runs fn in a transaction carried by the ctx it is given; when
	// ctx already carries one, fn joins it.
	InTx(ctx context.Context, fn func(ctx context.Context) error) error

	// LockOrder reads the order and, on PostgreSQL, locks its row until the
	// transaction ends (SQLite transactions are serialised anyway). It
	// returns ErrNotFound.
	LockOrder(ctx context.Context, merchantID, id string) (Order, error)
	// MarkOrderPaid moves a pending_payment order to paid; a paid order is
	// left as it is.
	MarkOrderPaid(ctx context.Context, merchantID, id string, now time.Time) error

	// CreatePayment inserts p. It returns ErrPaymentInProgress when the
	// order already has an active or succeeded payment.
	CreatePayment(ctx context.Context, p Payment) error
	// GetPayment returns the merchant's payment. It returns ErrNotFound.
	GetPayment(ctx context.Context, merchantID, id string) (Payment, error)
	// LockPayment is GetPayment with a row lock, like LockOrder.
	LockPayment(ctx context.Context, merchantID, id string) (Payment, error)
	// FindPayment returns the payment with this id, whatever its merchant
	// (provider events name only our id). It returns ErrNotFound.
	FindPayment(ctx context.Context, id string) (Payment, error)
	// MovePayment writes p's status, charge id and decline code if the
	// stored status is one of from, and reports whether it did.
	MovePayment(ctx context.Context, p Payment, from ...Status) (bool, error)
	// AddRefunded adds amount to the payment's amount_refunded; the
	// database refuses a total above the payment's amount.
	AddRefunded(ctx context.Context, merchantID, paymentID string, amount int64, now time.Time) error

	// CreateRefund inserts r.
	CreateRefund(ctx context.Context, r Refund) error
	// GetRefund returns the merchant's refund. It returns ErrNotFound.
	GetRefund(ctx context.Context, merchantID, id string) (Refund, error)
	// FindRefund returns the refund with this id, whatever its merchant.
	// It returns ErrNotFound.
	FindRefund(ctx context.Context, id string) (Refund, error)
	// LockRefund is GetRefund with a row lock, like LockOrder.
	LockRefund(ctx context.Context, merchantID, id string) (Refund, error)
	// ReservedRefunds sums the payment's refunds that are neither failed
	// nor canceled: what is already given back or on its way.
	ReservedRefunds(ctx context.Context, merchantID, paymentID string) (int64, error)
	// MoveRefund writes r's status and provider refund id if the stored
	// status is one of from, and reports whether it did.
	MoveRefund(ctx context.Context, r Refund, from ...Status) (bool, error)

	// CreateOrphan inserts o, unless an orphan of its kind with its
	// provider id exists already (then nothing changes), and reports
	// whether it did.
	CreateOrphan(ctx context.Context, o Orphan) (bool, error)
	// GetOrphan returns the merchant's orphan. It returns ErrNotFound.
	GetOrphan(ctx context.Context, merchantID, id string) (Orphan, error)
	// SaveOrphan writes o's status, provider refund id and note. It
	// returns ErrNotFound.
	SaveOrphan(ctx context.Context, o Orphan) error

	// RecordEvent puts a provider event id into the inbox and reports
	// whether it was new. Called in the transaction that applies the event.
	RecordEvent(ctx context.Context, id, eventType string, now time.Time) (bool, error)
	// EventRecorded reports whether the inbox holds the event id: a
	// delivery of an event already applied is answered from it, before
	// the provider is asked anything.
	EventRecorded(ctx context.Context, id string) (bool, error)
}

// OrderChangeStore changes orders after they are created. paymentsdb.Store
// implements it beside Store. The Service finds it on its Store, the way
// io.Copy finds io.WriterTo on a Writer, so that a Store which only creates
// and reads orders (a test double) still makes a Service. Errors as for
// Store, plus those listed.
//
// Each change is one UPDATE that bumps the order's version and is
// conditional: the database, not a read before it, decides whether it
// applies, so two concurrent writers cannot both win.
type OrderChangeStore interface {
	// InTx runs fn in a transaction carried by the ctx it is given; when
	// ctx already carries one, fn joins it.
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
	// LockOrder reads the order and locks its row until the transaction
	// ends (as PaymentStore.LockOrder). It returns ErrNotFound.
	LockOrder(ctx context.Context, merchantID, id string) (Order, error)
	// SetShippingAddress writes addr if the order is pending payment and,
	// when version is not zero, still at that version. It returns the order
	// as the UPDATE left it, or false when no order met the conditions and
	// nothing was written.
	SetShippingAddress(ctx context.Context, merchantID, id string, addr ShippingAddress, version int64, now time.Time) (Order, bool, error)
	// SetItems writes items and amountTotal if the order is still at
	// version, pending payment, and without a pending, processing or
	// succeeded payment. It returns the order as the UPDATE left it, or
	// false when no order met the conditions and nothing was written.
	SetItems(ctx context.Context, merchantID, id string, items []Item, amountTotal, version int64, now time.Time) (Order, bool, error)
}
