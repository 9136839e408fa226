package payments

import "context"

// Store keeps the domain's records. The Service declares it because the
// Service is what consumes it; GormStore is the implementation. Every method
// joins the transaction carried by ctx, if any (database.WithTx), so a
// caller that owns a transaction decides when the writes become visible.
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
