package client

import "time"

// Meta tells how a result was obtained. Every result embeds it.
type Meta struct {
	// Replayed is true when the server answered from its stored record (the
	// Idempotent-Replayed header): the operation had already run under this
	// key, and nothing ran again.
	Replayed bool `json:"-"`
	// IdempotencyKey is the key the call sent; empty for a GET. Keep it to
	// continue the same operation later (WithIdempotencyKey).
	IdempotencyKey string `json:"-"`
	// Attempts is how many HTTP requests the call made.
	Attempts int `json:"-"`
}

// meta lets the generic decoding fill in any result that embeds Meta.
func (m *Meta) meta() *Meta { return m }

// Order statuses.
const (
	OrderStatusPendingPayment = "pending_payment"
	OrderStatusPaid           = "paid"
)

// Payment and refund statuses.
const (
	// StatusProcessing means the provider's outcome is not known yet; the
	// server resolves it (a retry with the same key, a webhook or its
	// reconciler).
	StatusProcessing = "processing"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
	// StatusCanceled means it never reached the provider and was
	// abandoned; nothing was charged or refunded.
	StatusCanceled = "canceled"
)

// OrderItem is one line of an order. Amounts are integers in the currency's
// minor unit (cents), never floats.
type OrderItem struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	Quantity   int64  `json:"quantity"`
	UnitAmount int64  `json:"unit_amount"`
}

// CreateOrderParams is the body of CreateOrder.
type CreateOrderParams struct {
	CustomerID string `json:"customer_id"`
	// Currency is an upper-case ISO 4217 code, like "BRL".
	Currency string            `json:"currency"`
	Items    []OrderItem       `json:"items"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ShippingAddress is where an order ships.
type ShippingAddress struct {
	Name       string `json:"name"`
	Line1      string `json:"line1"`
	Line2      string `json:"line2"`
	City       string `json:"city"`
	PostalCode string `json:"postal_code"`
	Country    string `json:"country"`
}

// Order is an order as the API shows it.
type Order struct {
	ID         string      `json:"id"`
	Object     string      `json:"object"`
	CustomerID string      `json:"customer_id"`
	Currency   string      `json:"currency"`
	Items      []OrderItem `json:"items"`
	// AmountTotal is what a payment charges, in minor units.
	AmountTotal int64 `json:"amount_total"`
	// Status is OrderStatusPendingPayment or OrderStatusPaid.
	Status          string            `json:"status"`
	Metadata        map[string]string `json:"metadata"`
	ShippingAddress *ShippingAddress  `json:"shipping_address"`
	Version         int64             `json:"version"`
	CreatedAt       time.Time         `json:"created_at"`
	Meta
}

// PayParams is the body of PayOrder.
type PayParams struct {
	// PaymentMethod is a token such as "pm_card_visa".
	PaymentMethod string `json:"payment_method"`
}

// Payment is a payment as the API shows it.
type Payment struct {
	ID       string `json:"id"`
	Object   string `json:"object"`
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// Status is StatusSucceeded, StatusFailed or StatusProcessing.
	Status        string `json:"status"`
	PaymentMethod string `json:"payment_method"`
	// ProviderChargeID is empty until the provider has answered.
	ProviderChargeID string `json:"provider_charge_id"`
	// DeclineCode says why a failed payment was declined.
	DeclineCode    string    `json:"decline_code"`
	AmountRefunded int64     `json:"amount_refunded"`
	CreatedAt      time.Time `json:"created_at"`
	Meta
}

// RefundParams is the body of RefundPayment.
type RefundParams struct {
	// Amount to refund in minor units; zero refunds all that is left.
	Amount int64 `json:"amount,omitempty"`
}

// Refund is a refund as the API shows it.
type Refund struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	PaymentID string `json:"payment_id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	// Status is StatusSucceeded, StatusFailed (nothing was given back) or
	// StatusProcessing.
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	Meta
}
