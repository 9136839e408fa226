package handlers

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/problem"
)

func TestJSONInteger(t *testing.T) {
	tests := []struct {
		lit  string
		want int64
		err  error
	}{
		{"2", 2, nil},
		{"-2", -2, nil},
		{"2.0", 2, nil},
		{"2e0", 2, nil},
		{"2E+0", 2, nil},
		{"0.2e1", 2, nil},
		{"200e-2", 2, nil},
		{"1.25e2", 125, nil},
		{"0", 0, nil},
		{"-0.0e5", 0, nil},
		{"0e999999999999999999999", 0, nil},
		{"1e12", 1_000_000_000_000, nil},
		{"9223372036854775807", 9223372036854775807, nil},
		{"-9223372036854775808", -9223372036854775808, nil},
		{"9.223372036854775807e18", 9223372036854775807, nil},
		{"2.5", 0, errNotWhole},
		{"25e-1", 0, errNotWhole},
		{"1e-999999999999999999999", 0, errNotWhole},
		{"9223372036854775808", 0, errOutOfRange},
		{"1e19", 0, errOutOfRange},
		{"1e999999999", 0, errOutOfRange},
		{"1e999999999999999999999", 0, errOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.lit, func(t *testing.T) {
			got, err := jsonInteger(tt.lit)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// FuzzJSONInteger checks jsonInteger against exact rational arithmetic for
// every valid JSON number with a modest exponent.
func FuzzJSONInteger(f *testing.F) {
	for _, seed := range []string{"2", "2.0", "2e0", "-1.5", "1e19", "123.4500e2", "0.0001e4", "-9223372036854775808"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		var n json.Number
		if len(lit) > 64 || json.Unmarshal([]byte(lit), &n) != nil || string(n) != lit {
			return // not a JSON number literal
		}
		if i := strings.IndexAny(lit, "eE"); i >= 0 && len(lit)-i > 4 {
			return // big.Rat would take its time over huge exponents
		}
		r, ok := new(big.Rat).SetString(lit)
		require.True(t, ok, lit)
		got, err := jsonInteger(lit)
		switch {
		case !r.IsInt():
			require.ErrorIs(t, err, errNotWhole, lit)
		case !r.Num().IsInt64():
			require.ErrorIs(t, err, errOutOfRange, lit)
		default:
			require.NoError(t, err, lit)
			require.Equal(t, r.Num().Int64(), got, lit)
		}
	})
}

// FuzzDecodeStrict checks that no body makes the decoder panic, and that
// whatever it refuses it refuses as a requestError.
func FuzzDecodeStrict(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `[]`, `null`, `{"customer_id":"c","items":[{"quantity":2.0}]}`,
		`{"items":[1,{"sku":5}],"metadata":{"a":[]}}`, `{"a":1} {}`, `{"items":{}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req CreateOrderRequest
		err := decodeStrict(body, &req)
		if err != nil {
			var re *requestError
			require.ErrorAs(t, err, &re)
		}
	})
}

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		detail string
		fields []problem.FieldError
	}{
		{name: "not JSON", body: `{"customer_id":`, detail: "The body is not valid JSON."},
		{name: "two values", body: `{} {}`, detail: "The body must hold exactly one JSON value."},
		{name: "an array", body: `[]`, detail: "The body must be a JSON object."},
		{name: "null", body: `null`, detail: "The body must be a JSON object."},
		{name: "every wrong field, by full path", body: `{
			"customer_id": 7, "colour": "red",
			"items": [{"sku": "S", "quantity": 1}, {"sku": ["x"], "quantity": "2", "unit_amount": 2.5, "size": 1}],
			"metadata": {"a": 1, "b": "ok"}}`,
			fields: []problem.FieldError{
				{Field: "colour", Message: "is not a known field"},
				{Field: "currency", Message: "is required"},
				{Field: "customer_id", Message: "must be a string"},
				{Field: "items[0].name", Message: "is required"},
				{Field: "items[0].unit_amount", Message: "is required"},
				{Field: "items[1].name", Message: "is required"},
				{Field: "items[1].quantity", Message: "must be an integer"},
				{Field: "items[1].size", Message: "is not a known field"},
				{Field: "items[1].sku", Message: "must be a string"},
				{Field: "items[1].unit_amount", Message: "must be a whole number"},
				{Field: "metadata.a", Message: "must be a string"},
			}},
		{name: "out of range", body: `{"customer_id":"c","currency":"BRL","items":[{"sku":"S","name":"N","quantity":1e30,"unit_amount":1}]}`,
			fields: []problem.FieldError{{Field: "items[0].quantity", Message: "is out of range"}}},
		{name: "items not an array", body: `{"customer_id":"c","currency":"BRL","items":{}}`,
			fields: []problem.FieldError{{Field: "items", Message: "must be an array"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req CreateOrderRequest
			err := decodeStrict([]byte(tt.body), &req)
			var re *requestError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tt.detail, re.detail)
			require.Equal(t, tt.fields, re.fields)
		})
	}

	t.Run("valid, with whole numbers in any spelling", func(t *testing.T) {
		var req CreateOrderRequest
		err := decodeStrict([]byte(`{"customer_id":"cus_1","currency":"BRL",
			"items":[{"sku":"S","name":"N","quantity":2.0,"unit_amount":125e1}],"metadata":{"k":"v"}}`), &req)
		require.NoError(t, err)
		require.Equal(t, CreateOrderRequest{
			CustomerID: "cus_1",
			Currency:   "BRL",
			Items:      []OrderItem{{SKU: "S", Name: "N", Quantity: 2, UnitAmount: 1250}},
			Metadata:   map[string]string{"k": "v"},
		}, req)
	})
	t.Run("member names are read unescaped, and a name twice is not JSON", func(t *testing.T) {
		var req CreateOrderRequest
		err := decodeStrict([]byte(`{"customer\u005fid":"cus_1","\u0063urrency":"BRL",
			"items":[{"sku":"S","na\u006de":"N","quantity":1,"unit_amount":1}],"metadata":{"k\"ey":"v"}}`), &req)
		require.NoError(t, err)
		require.Equal(t, CreateOrderRequest{
			CustomerID: "cus_1",
			Currency:   "BRL",
			Items:      []OrderItem{{SKU: "S", Name: "N", Quantity: 1, UnitAmount: 1}},
			Metadata:   map[string]string{`k"ey`: "v"},
		}, req)
		var re *requestError
		require.ErrorAs(t, decodeStrict([]byte(`{"currency":"BRL","customer_id":"c","items":[],"\u0063urrency":"EUR"}`), &req), &re)
		require.Equal(t, errInvalidJSON, re)
		require.ErrorAs(t, decodeStrict([]byte(`{"customer_id":"c","currency":"BRL","items":[],"colo\u0075r":1}`), &req), &re)
		require.Equal(t, []problem.FieldError{{Field: "colour", Message: "is not a known field"}}, re.fields)
	})
	t.Run("an empty body is an empty object, without its required members", func(t *testing.T) {
		var req CreateOrderRequest
		var re *requestError
		require.ErrorAs(t, decodeStrict(nil, &req), &re)
		require.Equal(t, []problem.FieldError{
			{Field: "currency", Message: "is required"},
			{Field: "customer_id", Message: "is required"},
			{Field: "items", Message: "is required"},
		}, re.fields)
		var refund RefundPaymentRequest
		require.NoError(t, decodeStrict(nil, &refund), "a refund has no required member")
		require.Nil(t, refund.Amount)
		require.ErrorIs(t, decodeStrict([]byte(" \n"), &refund), errInvalidJSON, "white space alone is not JSON")
	})
}

// TestDecodeStrictRequiredAndNull: a required member left out, or null
// where the DTO has no pointer, is refused by its path, whatever else the
// body holds; an optional member may be left out, and a nullable one (a
// pointer) may be null. The rule is the struct tags', the same ones swag
// writes into the document's required lists.
func TestDecodeStrictRequiredAndNull(t *testing.T) {
	const item = `{"sku":"S","name":"N","quantity":1,"unit_amount":100}`
	tests := []struct {
		name   string
		dst    any
		body   string
		fields []problem.FieldError
	}{
		{"an item without unit_amount", &OrderItem{}, `{"sku":"S","name":"N","quantity":1}`,
			[]problem.FieldError{{Field: "unit_amount", Message: "is required"}}},
		{"an item with a null unit_amount", &OrderItem{}, `{"sku":"S","name":"N","quantity":1,"unit_amount":null}`,
			[]problem.FieldError{{Field: "unit_amount", Message: "must not be null"}}},
		{"an order's item without unit_amount", &CreateOrderRequest{},
			`{"customer_id":"c","currency":"BRL","items":[` + item + `,{"sku":"S","name":"N","quantity":1}]}`,
			[]problem.FieldError{{Field: "items[1].unit_amount", Message: "is required"}}},
		{"null metadata", &CreateOrderRequest{}, `{"customer_id":"c","currency":"BRL","items":[` + item + `],"metadata":null}`,
			[]problem.FieldError{{Field: "metadata", Message: "must not be null"}}},
		{"a null metadata value", &CreateOrderRequest{}, `{"customer_id":"c","currency":"BRL","items":[` + item + `],"metadata":{"k":null}}`,
			[]problem.FieldError{{Field: "metadata.k", Message: "must not be null"}}},
		{"a null item", &CreateOrderRequest{}, `{"customer_id":"c","currency":"BRL","items":[null]}`,
			[]problem.FieldError{{Field: "items[0]", Message: "must not be null"}}},
		{"null line2 and postal_code", &ShippingAddress{}, `{"name":"A","line1":"L","city":"C","country":"BR","line2":null,"postal_code":null}`,
			[]problem.FieldError{{Field: "line2", Message: "must not be null"}, {Field: "postal_code", Message: "must not be null"}}},
		{"a customer without name", &CreateCustomerRequest{}, `{"email":"ada@example.com"}`,
			[]problem.FieldError{{Field: "name", Message: "is required"}}},
		{"a payment without method", &PayOrderRequest{}, `{}`,
			[]problem.FieldError{{Field: "payment_method", Message: "is required"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var re *requestError
			require.ErrorAs(t, decodeStrict([]byte(tt.body), tt.dst), &re)
			require.Equal(t, tt.fields, re.fields)
		})
	}

	t.Run("optional members may be left out", func(t *testing.T) {
		var addr ShippingAddress
		require.NoError(t, decodeStrict([]byte(`{"name":"A","line1":"L","city":"C","country":"BR"}`), &addr))
		require.Empty(t, addr.Line2+addr.PostalCode, "an optional text left out is empty")
		var order CreateOrderRequest
		require.NoError(t, decodeStrict([]byte(`{"customer_id":"c","currency":"BRL","items":[`+item+`]}`), &order))
		require.Nil(t, order.Metadata)
	})
	t.Run("a nullable member may be null", func(t *testing.T) {
		refund := RefundPaymentRequest{Amount: new(int64)}
		require.NoError(t, decodeStrict([]byte(`{"amount":null}`), &refund))
		require.Nil(t, refund.Amount)
		require.NoError(t, decodeStrict([]byte(`{"amount":2.0}`), &refund))
		require.Equal(t, int64(2), *refund.Amount)
	})
	t.Run("an open object skips what it does not declare, and still requires what it does", func(t *testing.T) {
		var ev ProviderEventRequest
		var re *requestError
		require.ErrorAs(t, decodeStrict([]byte(`{"id":"evt_1","livemode":false,"data":{"object":{},"previous":{}}}`), &ev), &re)
		require.Equal(t, []problem.FieldError{
			{Field: "created", Message: "is required"},
			{Field: "type", Message: "is required"},
		}, re.fields)
		require.JSONEq(t, `{}`, string(ev.Data.Object))
	})
}

// TestDecodeStrictIsBounded: an array or object beyond its DTO's limit is
// refused at the first element too many, and at most MaxFieldErrors fields
// are listed, in name order, with the count of all.
func TestDecodeStrictIsBounded(t *testing.T) {
	t.Run("half a million items", func(t *testing.T) {
		body := `{"customer_id":"c","items":[` + strings.Repeat(`{"sku":"s","name":"n","quantity":1,"unit_amount":1},`, 500_000) + `{}]}`
		var req CreateOrderRequest
		var re *requestError
		require.ErrorAs(t, decodeStrict([]byte(body), &req), &re)
		require.Equal(t, []problem.FieldError{{Field: "items", Message: "must contain at most 100 items"}}, re.fields)
		require.Len(t, req.Items, 100, "decoding stopped at the limit")
	})
	t.Run("too many metadata keys", func(t *testing.T) {
		var sb strings.Builder
		sb.WriteString(`{"metadata":{`)
		for i := range 60 {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(`"k` + strconv.Itoa(i) + `":"v"`)
		}
		sb.WriteString(`}}`)
		var req CreateOrderRequest
		var re *requestError
		require.ErrorAs(t, decodeStrict([]byte(sb.String()), &req), &re)
		require.Equal(t, []problem.FieldError{{Field: "metadata", Message: "must have at most 50 keys"}}, re.fields)
	})
	t.Run("thirty unknown members: twenty listed in name order, thirty counted", func(t *testing.T) {
		var sb strings.Builder
		sb.WriteString(`{`)
		for i := 29; i >= 0; i-- {
			fmt.Fprintf(&sb, `"x%02d":1,`, i)
		}
		sb.WriteString(`"customer_id":"c","currency":"BRL","items":[{"sku":"S","name":"N","quantity":1,"unit_amount":1}]}`)
		var req CreateOrderRequest
		var re *requestError
		require.ErrorAs(t, decodeStrict([]byte(sb.String()), &req), &re)
		require.Len(t, re.fields, MaxFieldErrors)
		require.Equal(t, 30, re.count)
		for i, f := range re.fields {
			require.Equal(t, fmt.Sprintf("x%02d", i), f.Field)
		}
	})
	t.Run("the DTO's limits are the domain's", func(t *testing.T) {
		typ := reflect.TypeFor[CreateOrderRequest]()
		items, _ := typ.FieldByName("Items")
		require.Equal(t, strconv.Itoa(payments.MaxItems), items.Tag.Get("maxItems"))
		metadata, _ := typ.FieldByName("Metadata")
		require.Equal(t, strconv.Itoa(payments.MaxMetadataKeys), metadata.Tag.Get("maxProperties"))
	})
}

// TestValidationProblemIsBounded: a domain refusal of many fields lists
// twenty and counts them all.
func TestValidationProblemIsBounded(t *testing.T) {
	fields := make([]payments.FieldError, 250)
	for i := range fields {
		fields[i] = payments.FieldError{Field: fmt.Sprintf("items[%d].sku", i), Message: "is required"}
	}
	decode := func(err error) problem.Problem {
		t.Helper()
		a, known := errorAnswer(err)
		require.True(t, known)
		var p problem.Problem
		require.NoError(t, json.Unmarshal(a.Body, &p))
		return p
	}
	p := decode(&payments.ValidationError{Fields: fields})
	require.Len(t, p.Errors, MaxFieldErrors)
	require.Equal(t, 250, p.ErrorCount)
	require.Contains(t, p.Detail, "at least 250")
	small := decode(&requestError{fields: []problem.FieldError{{Field: "a", Message: "b"}}})
	require.Zero(t, small.ErrorCount, "error_count only when more were found than listed")
}

// BenchmarkDecodeWideOrder is the decoding of a 900 KB order whose items
// array has 300,000 elements: refused at the 101st, so its cost is the
// first hundred items, not the body (B/op is the heap it takes).
func BenchmarkDecodeWideOrder(b *testing.B) {
	body := []byte(`{"customer_id":"cus_1","currency":"BRL","items":[` + strings.Repeat(`{},`, 300_000) + `{}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var req CreateOrderRequest
		if err := decodeStrict(body, &req); err == nil {
			b.Fatal("accepted")
		}
	}
}

// TestQueryInteger: an integer query parameter takes every spelling of a
// whole number that a body takes, and the decimal spellings an OpenAPI
// validator reads as an integer parameter (libopenapi-validator, the one
// the end-to-end tests use, agrees on each of these).
func TestQueryInteger(t *testing.T) {
	for raw, want := range map[string]int64{"10": 10, "10.0": 10, "1e1": 10, "010": 10, "+10": 10, "10.": 10, ".1e2": 10, "-3": -3} {
		got, err := queryInteger(raw)
		require.NoError(t, err, raw)
		require.Equal(t, want, got, raw)
	}
	for _, raw := range []string{"", "abc", "1.5", "1e", "e1", ".", "0x10", "Inf", "NaN", "1_0", " 1", "1 ", "1\x00", "1e400", "--1"} {
		_, err := queryInteger(raw)
		require.Error(t, err, "%q", raw)
	}
}
