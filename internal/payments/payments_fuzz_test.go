package payments

import (
	"errors"
	"math/big"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzValidateOrder checks the rules of a new order against arbitrary input:
// a refusal is a *ValidationError, and an order it accepts has a customer id
// of visible ASCII, a supported currency, bounded lines whose total fits
// (computed here without overflow), and metadata of printable UTF-8, so
// that PostgreSQL can store every byte. The seed corpus is in
// testdata/fuzz/FuzzValidateOrder.
func FuzzValidateOrder(f *testing.F) {
	f.Fuzz(func(t *testing.T, customerID, currency, sku, name string, quantity, unitAmount int64, lines uint8, metaKey, metaValue string) {
		in := NewOrderInput{CustomerID: customerID, Currency: currency, Metadata: map[string]string{metaKey: metaValue}}
		for range int(lines) % (MaxItems + 2) {
			in.Items = append(in.Items, Item{SKU: sku, Name: name, Quantity: quantity, UnitAmount: unitAmount})
		}
		err := in.Validate()
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) == 0 {
				t.Fatalf("refused with %v", err)
			}
			return
		}
		if customerID == "" || len(customerID) > MaxCustomerIDLength || !visibleASCII(customerID) {
			t.Fatalf("customer id %q accepted", customerID)
		}
		if !currencyCodes[currency] {
			t.Fatalf("currency %q accepted", currency)
		}
		if len(in.Items) < 1 || len(in.Items) > MaxItems {
			t.Fatalf("%d items accepted", len(in.Items))
		}
		for _, s := range []string{sku, name} {
			if !text(s, MaxItemTextLength) || s == "" {
				t.Fatalf("item text %q accepted", s)
			}
		}
		if quantity < 1 || quantity > MaxQuantity || unitAmount < 0 || unitAmount > MaxUnitAmount {
			t.Fatalf("line %d x %d accepted", quantity, unitAmount)
		}
		exact := new(big.Int).Mul(big.NewInt(quantity), big.NewInt(unitAmount))
		exact.Mul(exact, big.NewInt(int64(len(in.Items))))
		if exact.Cmp(big.NewInt(MaxAmountTotal)) > 0 || exact.Int64() != total(in.Items) {
			t.Fatalf("total %s accepted (computed %d)", exact, total(in.Items))
		}
		if metaKey == "" || !text(metaKey, MaxMetadataKeyLength) || !text(metaValue, MaxMetadataValueLen) {
			t.Fatalf("metadata %q: %q accepted", metaKey, metaValue)
		}
	})
}

// text is the rule for free text: valid UTF-8, at most max characters, no
// control characters (NUL included).
func text(s string, max int) bool {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > max {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
