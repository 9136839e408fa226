package payments_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/payments"
)

// invisible is the refusal of bidirectional controls and zero-width spaces.
const invisible = "must not contain bidirectional controls (U+202A to U+202E, U+2066 to U+2069) or zero-width spaces (U+200B, U+2060, U+FEFF)"

func validInput() payments.NewOrderInput {
	return payments.NewOrderInput{
		CustomerID: "cus_1",
		Currency:   "BRL",
		Items:      []payments.Item{{SKU: "SKU-1", Name: "Coffee", Quantity: 2, UnitAmount: 1250}},
		Metadata:   map[string]string{"channel": "web"},
	}
}

func TestNewOrderInputValidate(t *testing.T) {
	manyItems := make([]payments.Item, payments.MaxItems+1)
	for i := range manyItems {
		manyItems[i] = payments.Item{SKU: "S", Name: "N", Quantity: 1, UnitAmount: 1}
	}
	manyKeys := map[string]string{}
	for i := range payments.MaxMetadataKeys + 1 {
		manyKeys[fmt.Sprintf("k%d", i)] = "v"
	}

	tests := []struct {
		name   string
		change func(in *payments.NewOrderInput)
		want   []payments.FieldError // nil: valid
	}{
		{name: "valid", change: func(*payments.NewOrderInput) {}},
		{name: "a free item beside a paid one is valid", change: func(in *payments.NewOrderInput) {
			in.Items = append(in.Items, payments.Item{SKU: "GIFT", Name: "Sticker", Quantity: 1, UnitAmount: 0})
		}},
		{name: "zero total", change: func(in *payments.NewOrderInput) { in.Items[0].UnitAmount = 0 },
			want: []payments.FieldError{{Field: "items", Message: "the order total must be positive: at least one item needs a unit_amount above 0"}}},
		{name: "joiners that scripts and emoji need", change: func(in *payments.NewOrderInput) {
			in.Items[0].Name = "می\u200cخواهم 👩\u200d💻"
			in.Items[0].SKU = "SKU\u200d1"
			in.Metadata = map[string]string{"ZW\u200cNJ": "a\u200db"}
		}},
		{name: "bidi override in the name", change: func(in *payments.NewOrderInput) { in.Items[0].Name = "Coffee\u202e eert" },
			want: []payments.FieldError{{Field: "items[0].name", Message: invisible}}},
		{name: "bidi isolate in the sku", change: func(in *payments.NewOrderInput) { in.Items[0].SKU = "SKU\u20661\u2069" },
			want: []payments.FieldError{{Field: "items[0].sku", Message: invisible}}},
		{name: "zero-width space in the sku", change: func(in *payments.NewOrderInput) { in.Items[0].SKU = "SKU\u200b-1" },
			want: []payments.FieldError{{Field: "items[0].sku", Message: invisible}}},
		{name: "byte order mark in the name", change: func(in *payments.NewOrderInput) { in.Items[0].Name = "\ufeffCoffee" },
			want: []payments.FieldError{{Field: "items[0].name", Message: invisible}}},
		{name: "embedding in a metadata key", change: func(in *payments.NewOrderInput) { in.Metadata = map[string]string{"\u202aref": "1"} },
			want: []payments.FieldError{{Field: "metadata.\u202aref", Message: "key " + invisible}}},
		{name: "word joiner in a metadata value", change: func(in *payments.NewOrderInput) { in.Metadata = map[string]string{"ref": "a\u2060b"} },
			want: []payments.FieldError{{Field: "metadata.ref", Message: invisible}}},
		{name: "nil metadata", change: func(in *payments.NewOrderInput) { in.Metadata = nil }},
		{name: "customer missing", change: func(in *payments.NewOrderInput) { in.CustomerID = "" },
			want: []payments.FieldError{{Field: "customer_id", Message: "is required"}}},
		{name: "customer too long", change: func(in *payments.NewOrderInput) { in.CustomerID = strings.Repeat("c", 256) },
			want: []payments.FieldError{{Field: "customer_id", Message: "must be at most 255 characters"}}},
		{name: "customer with a space", change: func(in *payments.NewOrderInput) { in.CustomerID = "cus 1" },
			want: []payments.FieldError{{Field: "customer_id", Message: "must contain only visible ASCII characters"}}},
		{name: "customer non-ASCII", change: func(in *payments.NewOrderInput) { in.CustomerID = "cüs" },
			want: []payments.FieldError{{Field: "customer_id", Message: "must contain only visible ASCII characters"}}},
		{name: "currency missing", change: func(in *payments.NewOrderInput) { in.Currency = "" },
			want: []payments.FieldError{{Field: "currency", Message: "is required"}}},
		{name: "currency lower case", change: func(in *payments.NewOrderInput) { in.Currency = "brl" },
			want: []payments.FieldError{{Field: "currency", Message: "must be a three-letter upper-case ISO 4217 code"}}},
		{name: "currency unknown", change: func(in *payments.NewOrderInput) { in.Currency = "XXX" },
			want: []payments.FieldError{{Field: "currency", Message: "is not an active ISO 4217 currency code"}}},
		{name: "no items", change: func(in *payments.NewOrderInput) { in.Items = nil },
			want: []payments.FieldError{{Field: "items", Message: "must contain at least 1 item"}}},
		{name: "too many items", change: func(in *payments.NewOrderInput) { in.Items = manyItems },
			want: []payments.FieldError{{Field: "items", Message: "must contain at most 100 items"}}},
		{name: "item fields", change: func(in *payments.NewOrderInput) {
			in.Items = append(in.Items, payments.Item{SKU: "", Name: strings.Repeat("n", 256), Quantity: 0, UnitAmount: -1})
		}, want: []payments.FieldError{
			{Field: "items[1].sku", Message: "is required"},
			{Field: "items[1].name", Message: "must be at most 255 characters"},
			{Field: "items[1].quantity", Message: "must be between 1 and 10000"},
			{Field: "items[1].unit_amount", Message: "must be between 0 and 1000000000000"},
		}},
		{name: "name counts characters, not bytes", change: func(in *payments.NewOrderInput) { in.Items[0].Name = strings.Repeat("é", 255) }},
		{name: "NUL in a name", change: func(in *payments.NewOrderInput) { in.Items[0].Name = "a\x00b" },
			want: []payments.FieldError{{Field: "items[0].name", Message: "must not contain control characters"}}},
		{name: "invalid UTF-8", change: func(in *payments.NewOrderInput) { in.Items[0].SKU = "\xff" },
			want: []payments.FieldError{{Field: "items[0].sku", Message: "must be valid UTF-8"}}},
		{name: "quantity too large", change: func(in *payments.NewOrderInput) { in.Items[0].Quantity = 10_001 },
			want: []payments.FieldError{{Field: "items[0].quantity", Message: "must be between 1 and 10000"}}},
		{name: "unit amount too large", change: func(in *payments.NewOrderInput) { in.Items[0].UnitAmount = 1_000_000_000_001 },
			want: []payments.FieldError{{Field: "items[0].unit_amount", Message: "must be between 0 and 1000000000000"}}},
		{name: "total over the cap", change: func(in *payments.NewOrderInput) {
			in.Items = []payments.Item{{SKU: "S", Name: "N", Quantity: 10_000, UnitAmount: 1_000_000_000_000}}
		}, want: []payments.FieldError{{Field: "items", Message: "the order total must be at most 1000000000000000"}}},
		{name: "too many metadata keys", change: func(in *payments.NewOrderInput) { in.Metadata = manyKeys },
			want: []payments.FieldError{{Field: "metadata", Message: "must have at most 50 keys"}}},
		{name: "metadata key and value", change: func(in *payments.NewOrderInput) {
			in.Metadata = map[string]string{strings.Repeat("k", 41): "v", "ok": strings.Repeat("v", 501), "": "x"}
		}, want: []payments.FieldError{
			{Field: "metadata.", Message: "key must be 1 to 40 printable characters"},
			{Field: "metadata.kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk", Message: "key must be 1 to 40 printable characters"},
			{Field: "metadata.ok", Message: "must be at most 500 characters"},
		}},
		{name: "metadata value may be empty", change: func(in *payments.NewOrderInput) { in.Metadata = map[string]string{"k": ""} }},
		{name: "every error at once, in field order", change: func(in *payments.NewOrderInput) {
			*in = payments.NewOrderInput{}
		}, want: []payments.FieldError{
			{Field: "customer_id", Message: "is required"},
			{Field: "currency", Message: "is required"},
			{Field: "items", Message: "must contain at least 1 item"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := validInput()
			tt.change(&in)
			err := in.Validate()
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, payments.ErrValidation)
			var ve *payments.ValidationError
			require.True(t, errors.As(err, &ve))
			require.Equal(t, tt.want, ve.Fields)
		})
	}
}

func TestNewOrder(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
	in := validInput()
	in.Items = append(in.Items, payments.Item{SKU: "SKU-2", Name: "Cake", Quantity: 3, UnitAmount: 900})

	o, err := payments.NewOrder("mch_1", "ord_1", in, now)
	require.NoError(t, err)
	require.Equal(t, int64(2*1250+3*900), o.AmountTotal)
	require.Equal(t, payments.OrderPendingPayment, o.Status)
	require.Equal(t, int64(1), o.Version)
	require.Equal(t, now, o.CreatedAt)

	// The order owns its data: changing the input afterwards changes nothing.
	in.Items[0].Quantity = 99
	in.Metadata["channel"] = "changed"
	require.Equal(t, int64(2), o.Items[0].Quantity)
	require.Equal(t, "web", o.Metadata["channel"])

	_, err = payments.NewOrder("mch_1", "ord_2", payments.NewOrderInput{}, now)
	require.ErrorIs(t, err, payments.ErrValidation)
}
