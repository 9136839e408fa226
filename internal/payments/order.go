package payments

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// OrderStatus is where an order is in its life.
type OrderStatus string

// An order waits for a payment until one succeeds; it is then paid.
const (
	OrderPendingPayment OrderStatus = "pending_payment"
	OrderPaid           OrderStatus = "paid"
)

// Limits of an order. They keep one order's row and its arithmetic small and
// safe: with at most MaxItems lines of at most MaxQuantity × MaxUnitAmount,
// the total cannot overflow int64 before MaxAmountTotal is checked.
const (
	MaxCustomerIDLength  = 255
	MaxItems             = 100
	MaxItemTextLength    = 255
	MaxQuantity          = 10_000
	MaxUnitAmount        = 1_000_000_000_000     // 1e12 minor units
	MaxAmountTotal       = 1_000_000_000_000_000 // 1e15 minor units
	MaxMetadataKeys      = 50
	MaxMetadataKeyLength = 40
	MaxMetadataValueLen  = 500
)

// Item is one line of an order. Amounts are int64 minor units of the
// order's currency.
type Item struct {
	SKU        string
	Name       string
	Quantity   int64
	UnitAmount int64
}

// Order is what a customer is asked to pay for.
type Order struct {
	ID          string
	MerchantID  string
	CustomerID  string
	Currency    string
	Items       []Item
	AmountTotal int64
	Status      OrderStatus
	Metadata    map[string]string
	// ShippingAddress is where the order goes; nil until a client sets it
	// (Service.SetShippingAddress).
	ShippingAddress *ShippingAddress
	// Version counts the changes of the row; later state changes update it
	// conditionally (optimistic locking).
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// NewOrderInput is what a client asks for when it creates an order.
type NewOrderInput struct {
	CustomerID string
	Currency   string
	Items      []Item
	Metadata   map[string]string
}

// Validate checks every rule of the input and returns nil or a
// *ValidationError that lists all refused fields, in field order.
func (in NewOrderInput) Validate() error {
	var fe fieldErrors

	switch {
	case in.CustomerID == "":
		fe.add("customer_id", "is required")
	case len(in.CustomerID) > MaxCustomerIDLength:
		fe.add("customer_id", fmt.Sprintf("must be at most %d characters", MaxCustomerIDLength))
	case !visibleASCII(in.CustomerID):
		fe.add("customer_id", "must contain only visible ASCII characters")
	}

	switch {
	case in.Currency == "":
		fe.add("currency", "is required")
	case !upperCaseCode(in.Currency):
		fe.add("currency", "must be a three-letter upper-case ISO 4217 code")
	case !currencyCodes[in.Currency]:
		fe.add("currency", "is not an active ISO 4217 currency code")
	}

	switch {
	case len(in.Items) == 0:
		fe.add("items", "must contain at least 1 item")
	case len(in.Items) > MaxItems:
		fe.add("items", fmt.Sprintf("must contain at most %d items", MaxItems))
	default:
		itemsValid := true
		for i, it := range in.Items {
			before := len(fe)
			checkItem(&fe, i, it)
			itemsValid = itemsValid && len(fe) == before
		}
		// Only bounded lines make a total that cannot overflow.
		switch sum := total(in.Items); {
		case !itemsValid:
		case sum > MaxAmountTotal:
			fe.add("items", fmt.Sprintf("the order total must be at most %d", int64(MaxAmountTotal)))
		case sum == 0:
			// An order is made to be paid, and no provider charges zero:
			// a zero total could never leave pending_payment.
			fe.add("items", "the order total must be positive: at least one item needs a unit_amount above 0")
		}
	}

	if len(in.Metadata) > MaxMetadataKeys {
		fe.add("metadata", fmt.Sprintf("must have at most %d keys", MaxMetadataKeys))
	} else {
		var refused fieldErrors
		for k, v := range in.Metadata {
			switch {
			case k == "" || !utf8.ValidString(k) || utf8.RuneCountInString(k) > MaxMetadataKeyLength || !printable(k):
				refused.add("metadata."+k, fmt.Sprintf("key must be 1 to %d printable characters", MaxMetadataKeyLength))
			case !isText(k):
				refused.add("metadata."+k, "key "+msgInvisible)
			default:
				if m := textProblem(v, MaxMetadataValueLen, false); m != "" {
					refused.add("metadata."+k, m)
				}
			}
		}
		// Sorted by key, so that the same input always lists its errors
		// alike (a key has at most one).
		slices.SortFunc(refused, func(a, b FieldError) int { return strings.Compare(a.Field, b.Field) })
		fe = append(fe, refused...)
	}
	return fe.err()
}

// NewOrder validates in and builds the order it asks for, pending payment.
// It returns a *ValidationError when in breaks a rule. The order owns copies
// of the input's items and metadata.
func NewOrder(merchantID, id string, in NewOrderInput, now time.Time) (Order, error) {
	if err := in.Validate(); err != nil {
		return Order{}, err
	}
	metadata := make(map[string]string, len(in.Metadata))
	maps.Copy(metadata, in.Metadata)
	return Order{
		ID:          id,
		MerchantID:  merchantID,
		CustomerID:  in.CustomerID,
		Currency:    in.Currency,
		Items:       slices.Clone(in.Items),
		AmountTotal: total(in.Items),
		Status:      OrderPendingPayment,
		Metadata:    metadata,
		Version:     1,
		CreatedAt:   now,
		UpdatedAt:   now,
	}, nil
}

// checkItem applies the rules of one order line, naming its fields under
// path ("items[0]" in a new order, "" for the body of an added item). The
// rules are shared so that an item added later obeys exactly what an item
// created with the order does.
func checkItem(fe *fieldErrors, index int, it Item) {
	// The field's name is spelled only for an error: "items[1].sku", or
	// "sku" for an item alone (index -1).
	field := func(name string) string {
		if index < 0 {
			return name
		}
		return "items[" + strconv.Itoa(index) + "]." + name
	}
	if m := textProblem(it.SKU, MaxItemTextLength, true); m != "" {
		fe.add(field("sku"), m)
	}
	if m := textProblem(it.Name, MaxItemTextLength, true); m != "" {
		fe.add(field("name"), m)
	}
	if it.Quantity < 1 || it.Quantity > MaxQuantity {
		fe.add(field("quantity"), fmt.Sprintf("must be between 1 and %d", MaxQuantity))
	}
	if it.UnitAmount < 0 || it.UnitAmount > MaxUnitAmount {
		fe.add(field("unit_amount"), fmt.Sprintf("must be between 0 and %d", int64(MaxUnitAmount)))
	}
}

func total(items []Item) int64 {
	var sum int64
	for _, it := range items {
		sum += it.Quantity * it.UnitAmount
	}
	return sum
}

// checkText refuses empty (when required), over-long (in characters) and
// non-printable text. Control characters are refused because PostgreSQL
// cannot store NUL in text or JSONB, and the rest only ever arrive by
// mistake or malice; invalid UTF-8 because PostgreSQL refuses it too.
func checkText(fe *fieldErrors, field, s string, maxLen int, required bool) {
	if m := textProblem(s, maxLen, required); m != "" {
		fe.add(field, m)
	}
}

// textProblem is checkText's refusal of s, or "" when s is fine.
func textProblem(s string, maxLen int, required bool) string {
	switch {
	case s == "" && required:
		return "is required"
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case utf8.RuneCountInString(s) > maxLen:
		return fmt.Sprintf("must be at most %d characters", maxLen)
	case isText(s):
		return ""
	case !printable(s):
		return "must not contain control characters"
	}
	return msgInvisible
}

// msgInvisible is the refusal of text that PatternText refuses for
// another reason than a control character.
const msgInvisible = "must not contain bidirectional controls (U+202A to U+202E, U+2066 to U+2069) or zero-width spaces (U+200B, U+2060, U+FEFF)"

// PatternText refuses, besides control characters, the characters that
// change how text around them is shown without being seen themselves: the
// bidirectional embeddings, overrides and isolates, which can make
// "SKU-1<U+202E>2-UKS" read as something else on a receipt or a dashboard
// (the Trojan Source trick), and the zero-width spaces, which make two names
// that look alike differ. printable tells the two refusals apart, for the
// message.
func printable(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

func upperCaseCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}
