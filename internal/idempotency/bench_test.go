package idempotency

// Benchmarks of the core's own work on a request: the key and the
// fingerprint. The middleware benchmarks are in ginidem. Run them with
//
//	go test -run '^$' -bench . -benchmem -count 5 ./internal/idempotency/...
//
// and compare runs with benchstat.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func BenchmarkValidateKey(b *testing.B) {
	keys := []struct{ name, key string }{
		{"short", "550e8400-e29b-41d4-a716-446655440000"},
		{"max_length", strings.Repeat("k", MaxKeyLength)},
	}
	for _, k := range keys {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := ValidateKey(k.key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// orderBody is a create-order request with n items; nested adds metadata
// with objects and arrays inside, which the orders API does not accept but
// the fingerprint must still spell canonically.
func orderBody(n int, nested bool) []byte {
	var sb strings.Builder
	sb.WriteString(`{"customer_id":"cus_8f14e45fceea167a","currency":"BRL","items":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"sku":"SKU-%05d","name":"Coffee beans, %d g","quantity":%d,"unit_amount":%d}`, i, 250+i, 1+i%5, 1250+i*10)
	}
	sb.WriteString(`]`)
	if nested {
		sb.WriteString(`,"metadata":{"channel":"web","campaign":{"id":"cmp_42","utm":{"source":"newsletter","medium":"email","terms":["coffee","beans","roast"]}},` +
			`"shipping":{"address":{"line1":"Rua Augusta, 1500","city":"São Paulo","postal_code":"01304-001","country":"BR"},"window":{"from":"09:00","to":"18:00"}},` +
			`"flags":[true,false,null],"score":0.25,"notes":"leave at the door \u2014 ring twice"}`)
	}
	sb.WriteString(`}`)
	return []byte(sb.String())
}

// BenchmarkFingerprint is the middleware's work on the body: canonical JSON,
// then the hash of the request.
func BenchmarkFingerprint(b *testing.B) {
	bodies := []struct {
		name string
		body []byte
	}{
		{"small_order", orderBody(1, false)},
		{"items_100", orderBody(100, false)},
		{"nested_metadata", orderBody(3, true)},
	}
	for _, tc := range bodies {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.body)))
			for b.Loop() {
				canonical, err := canonicalize(context.Background(), tc.body)
				if err != nil {
					b.Fatal(err)
				}
				_ = fingerprint(http.MethodPost, "/v1/orders", nil, canonical)
			}
		})
	}
}
