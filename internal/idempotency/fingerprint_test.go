package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/canon"
)

func fp(t *testing.T, body string) string {
	t.Helper()
	canonical, err := canonicalize(context.Background(), []byte(body))
	require.NoError(t, err, body)
	return fingerprint("POST", "/v1/orders", nil, canonical)
}

func TestFingerprintIgnoresSpelling(t *testing.T) {
	same := []struct{ name, a, b string }{
		{"member order", `{"a":1,"b":2}`, `{"b":2,"a":1}`},
		{"whitespace", `{"a":[1,2]}`, " {\n\t\"a\" : [ 1 , 2 ] }\n"},
		{"integer as decimal", `{"n":2}`, `{"n":2.0}`},
		{"integer as exponent", `{"n":2}`, `{"n":2e0}`},
		{"escaped letter", `{"s":"\u00e9"}`, `{"s":"é"}`},
		{"escaped slash", `{"s":"a/b"}`, `{"s":"a\/b"}`},
		{"nested order", `{"o":{"x":1,"y":[{"b":1,"a":2}]}}`, `{"o":{"y":[{"a":2,"b":1}],"x":1}}`},
		{"empty body is an empty object", ``, `{}`},
	}
	for _, tc := range same {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, fp(t, tc.a), fp(t, tc.b))
		})
	}
	different := []struct{ name, a, b string }{
		{"other value", `{"n":2}`, `{"n":3}`},
		{"string vs number", `{"n":2}`, `{"n":"2"}`},
		{"array order", `{"a":[1,2]}`, `{"a":[2,1]}`},
		{"extra member", `{"a":1}`, `{"a":1,"b":null}`},
		{"case", `{"s":"a"}`, `{"s":"A"}`},
	}
	for _, tc := range different {
		t.Run(tc.name, func(t *testing.T) {
			require.NotEqual(t, fp(t, tc.a), fp(t, tc.b))
		})
	}
}

// TestFingerprintIsStable: the fingerprints stored by earlier versions are
// compared with the ones computed now, so the hashing never changes.
func TestFingerprintIsStable(t *testing.T) {
	require.Equal(t, "8f5466014bf9e942b3ba8ac68694a77e627e9d99dfc12bc472860f11abe09e2a",
		fingerprint("POST", "/v1/orders/:id/payments", map[string]string{"id": "ord_1", "b": "x"}, []byte(`{"a":1}`)))
	require.Equal(t, "3adbb9e13991dffe2d42e34acadb0b3f44487de0d2a8f8ab8bdd7d75707652e9",
		fingerprint("POST", "/v1/orders", nil, []byte(`{}`)))
	six := map[string]string{"f": "6", "e": "5", "d": "4", "c": "3", "b": "2", "a": "1"}
	// More names than requestDigest's array on the stack, sorted all the
	// same (the value is the SHA-256 of "4:POST2:/r1:a1:1...1:f1:6").
	require.Equal(t, "0401880f8e87f0508700a81f4beadf86fc6091af11a1238b9f29d9a8210dbede", fingerprint("POST", "/r", six, nil))
}

func TestFingerprintCoversRouteAndParams(t *testing.T) {
	body := []byte(`{}`)
	base := fingerprint("POST", "/v1/orders/:id/payments", map[string]string{"id": "ord_1"}, body)
	require.NotEqual(t, base, fingerprint("POST", "/v1/orders/:id/payments", map[string]string{"id": "ord_2"}, body))
	require.NotEqual(t, base, fingerprint("POST", "/v1/payments/:id/refunds", map[string]string{"id": "ord_1"}, body))
	require.NotEqual(t, base, fingerprint("PUT", "/v1/orders/:id/payments", map[string]string{"id": "ord_1"}, body))
	// Length prefixes keep part boundaries: "ab"+"c" is not "a"+"bc".
	require.NotEqual(t,
		fingerprint("POST", "/r", map[string]string{"ab": "c"}, body),
		fingerprint("POST", "/r", map[string]string{"a": "bc"}, body))
}

func TestCanonicalizeRefuses(t *testing.T) {
	for _, body := range []string{`{"a":1,"a":2}`, `{"a":`, `[1,]`, `{'a':1}`, `{"a":1}{"b":2}`, "\xff"} {
		_, err := canonicalize(context.Background(), []byte(body))
		require.ErrorIs(t, err, ErrMalformedBody, body)
	}
}

func TestValidateKey(t *testing.T) {
	valid := []string{"a", "order-123_ABC.~!", strings.Repeat("x", 255), "550e8400-e29b-41d4-a716-446655440000"}
	for _, k := range valid {
		require.NoError(t, ValidateKey(k), k)
	}
	invalid := []string{"", " ", "a b", "tab\tkey", "new\nline", "nul\x00", "del\x7f", "é", strings.Repeat("x", 256)}
	for _, k := range invalid {
		require.ErrorIs(t, ValidateKey(k), ErrKeyInvalid, "%q", k)
	}
}

func FuzzValidateKey(f *testing.F) {
	for _, seed := range []string{"", "a", "key-1", "a b", "\x00", "é", strings.Repeat("k", 256), "\r\nX-Injected: 1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidateKey(key)
		ok := len(key) >= 1 && len(key) <= 255
		for i := 0; i < len(key); i++ {
			if key[i] < 0x21 || key[i] > 0x7e {
				ok = false
			}
		}
		if ok != (err == nil) {
			t.Fatalf("ValidateKey(%q) = %v, want ok=%v", key, err, ok)
		}
		if err != nil && !errors.Is(err, ErrKeyInvalid) {
			t.Fatalf("error %v does not wrap ErrKeyInvalid", err)
		}
	})
}

func FuzzCanonicalize(f *testing.F) {
	for _, seed := range []string{`{}`, `{"b":1,"a":[1,2.0,2e0,"\u00e9"]}`, `{"a":1,"a":2}`, `[`, `null`, `{"n":1e400}`, `"x"`, ` {"z":{"y":{"x":-0}}} `} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := canonicalize(context.Background(), body)
		if err != nil {
			if !errors.Is(err, ErrMalformedBody) {
				t.Fatalf("error %v does not wrap ErrMalformedBody", err)
			}
			return
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("canonical form %q is not valid JSON", out)
		}
		// Canonical JSON is a fixed point.
		again, err := canonicalize(context.Background(), out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q (%v)", out, again, err)
		}
	})
}

// TestCanonicalizeRefusesDeepNesting: bodies may nest MaxBodyDepth levels
// and no more; brackets inside strings do not count.
func TestCanonicalizeRefusesDeepNesting(t *testing.T) {
	nest := func(n int) string { return strings.Repeat(`{"a":`, n-1) + `[]` + strings.Repeat(`}`, n-1) }
	for _, c := range []struct {
		name string
		body string
		ok   bool
	}{
		{"at the limit", nest(canon.DefaultMaxDepth), true},
		{"one over", nest(canon.DefaultMaxDepth + 1), false},
		{"far over", strings.Repeat("[", 5000) + strings.Repeat("]", 5000), false},
		{"brackets in strings", `{"a":"` + strings.Repeat(`[{`, 100) + `\"[["}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := canonicalize(context.Background(), []byte(c.body))
			if c.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrMalformedBody)
				require.ErrorContains(t, err, "nests")
			}
		})
	}
}
