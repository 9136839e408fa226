package payments

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// The patterns of rules.go against oracles written another way, rune by
// rune: the pattern is what the validators and the OpenAPI document share,
// so it must say exactly what the comment promises. Visible ASCII's oracle
// is visibleASCII itself, which TestLoopsAgreeWithPatterns also holds to
// the pattern for every rune and byte.

// The patterns that isText and visibleASCII decide without a regular
// expression.
var (
	textRE         = regexp.MustCompile(PatternText)
	visibleASCIIRE = regexp.MustCompile(PatternVisibleASCII)
)

// TestLoopsAgreeWithPatterns: isText and visibleASCII answer as their
// patterns do for every rune alone and between two letters, and for every
// byte (a byte of 0x80 and above alone is not UTF-8, which both read as
// U+FFFD).
func TestLoopsAgreeWithPatterns(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		for _, s := range []string{string(r), "a" + string(r) + "b"} {
			if isText(s) != textRE.MatchString(s) {
				t.Fatalf("isText(%q) = %v, PatternText says %v", s, isText(s), !isText(s))
			}
			if visibleASCII(s) != visibleASCIIRE.MatchString(s) {
				t.Fatalf("visibleASCII(%q) = %v, PatternVisibleASCII says %v", s, visibleASCII(s), !visibleASCII(s))
			}
		}
	}
	for b := range 256 {
		s := string([]byte{'a', byte(b), 'b'})
		require.Equal(t, textRE.MatchString(s), isText(s), "text %q", s)
		require.Equal(t, visibleASCIIRE.MatchString(s), visibleASCII(s), "visible ASCII %q", s)
	}
	require.True(t, isText("") && visibleASCII(""), "both match the empty string, as their patterns do")
}

// invisible are the characters PatternText refuses besides Cc.
var invisible = []rune{0x200b, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2060, 0x2066, 0x2067, 0x2068, 0x2069, 0xfeff}

func textOracle(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Cc, r) || slices.Contains(invisible, r) {
			return false
		}
	}
	return true
}

// emailOracle is local@domain: one @, a non-empty local part, a domain with
// a dot that neither starts nor ends it, no space or Cc anywhere.
func emailOracle(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || strings.Contains(domain, "@") || !strings.Contains(domain, ".") ||
		strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") {
		return false
	}
	for _, r := range s {
		if r <= ' ' || unicode.Is(unicode.Cc, r) {
			return false
		}
	}
	return true
}

func FuzzPatterns(f *testing.F) {
	for _, seed := range []string{
		"", "ada@example.com", " ada@example.com", "ada@example.com ", "a@b.c", "a@.b", "a@b.", "a@b", "@b.c", "a@@b.c",
		"a@b@c.d", "a\u00a0b@c.d", "a@b..c", "SKU-1\u202e2", "caf\u00e9", "\u200c\u200d", "nul\x00", "tab\t", "\u0085",
		"\ufeffbom", "pm_card_visa", "pm_", "pm", "pm_ x", "\xff", "ok\u2028",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // JSON strings are valid UTF-8 by the time a rule sees them
		}
		require.Equal(t, textOracle(s), textRE.MatchString(s), "text %q", s)
		require.Equal(t, textOracle(s), isText(s), "isText %q", s)
		require.Equal(t, emailOracle(s), emailRE.MatchString(s), "email %q", s)
		require.Equal(t, visibleASCII(s), visibleASCIIRE.MatchString(s), "visible ASCII %q", s)
		require.Equal(t, strings.HasPrefix(s, "pm_") && visibleASCII(s), paymentMethodRE.MatchString(s), "payment method %q", s)
	})
}

// TestPatternsAreSharedSyntax: each pattern stays within what RE2 and
// ECMA-262 read alike (rules.go), so that a JSON Schema validator in any
// language applies the rule the API applies.
func TestPatternsAreSharedSyntax(t *testing.T) {
	escapes := regexp.MustCompile(`\\(.)`)
	for _, p := range []string{PatternVisibleASCII, PatternText, PatternEmail, PatternPaymentMethod} {
		require.True(t, strings.HasPrefix(p, "^") && strings.HasSuffix(p, "$"), "%s is anchored", p)
		for _, m := range escapes.FindAllStringSubmatch(p, -1) {
			require.Contains(t, []string{"x", "."}, m[1], "%s: only \\xHH and \\. escapes", p)
		}
		require.NotContains(t, p, `\x{`, "%s: \\x{...} is RE2 only", p)
	}
}

func TestCurrencies(t *testing.T) {
	codes := Currencies()
	require.True(t, slices.IsSorted(codes))
	require.Greater(t, len(codes), 150, "every active ISO 4217 code, not an allow-list")
	for _, code := range []string{"AUD", "BRL", "CAD", "CHF", "EUR", "GBP", "INR", "JPY", "MXN", "USD", "SEK", "CLF", "BHD"} {
		require.Contains(t, codes, code)
	}
	for _, code := range []string{"XAU", "XTS", "XXX", "DEM", "brl", "BR"} {
		require.NotContains(t, codes, code, "no minor unit, withdrawn, or not a code")
	}
	for code, want := range map[string]int{"BRL": 2, "JPY": 0, "BHD": 3, "CLF": 4, "SEK": 2} {
		got, ok := MinorUnits(code)
		require.True(t, ok, code)
		require.Equal(t, want, got, code)
	}
	_, ok := MinorUnits("XAU")
	require.False(t, ok)
	require.Len(t, Countries(), 249)
}

func TestNewOrderTakesAnyActiveCurrency(t *testing.T) {
	item := []Item{{SKU: "S", Name: "N", Quantity: 1, UnitAmount: 100}}
	for _, code := range Currencies() {
		require.NoError(t, NewOrderInput{CustomerID: "c", Currency: code, Items: item}.Validate(), code)
	}
	err := NewOrderInput{CustomerID: "c", Currency: "XAU", Items: item}.Validate()
	require.ErrorContains(t, err, "currency is not an active ISO 4217 currency code")
}
