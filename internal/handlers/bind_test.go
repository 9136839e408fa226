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
				{Field: "customer_id", Message: "must be a string"},
				{Field: "items[1].quantity", Message: "must be an integer"},
				{Field: "items[1].size", Message: "is not a known field"},
				{Field: "items[1].sku", Message: "must be a string"},
				{Field: "items[1].unit_amount", Message: "must be a whole number"},
				{Field: "metadata.a", Message: "must be a string"},
			}},
		{name: "out of range", body: `{"items":[{"quantity":1e30}]}`,
			fields: []problem.FieldError{{Field: "items[0].quantity", Message: "is out of range"}}},
		{name: "items not an array", body: `{"items":{}}`,
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

	t.Run("valid, with whole numbers in any spelling and nulls", func(t *testing.T) {
		var req CreateOrderRequest
		err := decodeStrict([]byte(`{"customer_id":"cus_1","currency":null,
			"items":[{"sku":"S","name":"N","quantity":2.0,"unit_amount":125e1}],"metadata":{"k":"v"}}`), &req)
		require.NoError(t, err)
		require.Equal(t, CreateOrderRequest{
			CustomerID: "cus_1",
			Items:      []OrderItem{{SKU: "S", Name: "N", Quantity: 2, UnitAmount: 1250}},
			Metadata:   map[string]string{"k": "v"},
		}, req)
	})
	t.Run("an empty body is an empty object", func(t *testing.T) {
		var req CreateOrderRequest
		require.NoError(t, decodeStrict([]byte(" \n"), &req))
		require.Equal(t, CreateOrderRequest{}, req)
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
		sb.WriteString(`"customer_id":"c"}`)
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
