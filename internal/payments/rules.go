package payments

import (
	"regexp"
	"slices"

	"github.com/bojanz/currency"
)

// The rules of request fields that JSON Schema can state, stated once. The
// validators of this package decide with them, and scripts/openapifix writes
// the same values into the OpenAPI document (pattern, enum), so what the
// document promises and what the API accepts cannot differ. What JSON Schema
// cannot say (a positive total, one of your orders) is listed in the
// document's x-validation-rules instead.
//
// The patterns are written in the part of regular-expression syntax that Go's
// regexp (RE2) and JSON Schema's ECMA-262 read alike: anchors, character
// classes of \xHH escapes and literal characters (U+200B is in the string as
// itself), quantifiers; no \d, \s, \w, \u or \p, which the two read
// differently or not at all.
const (
	// PatternVisibleASCII is what ids, customer ids and references are made
	// of: visible ASCII, 0x21 to 0x7E. It matches the empty string too; a
	// required field says so with minLength.
	PatternVisibleASCII = `^[\x21-\x7E]*$`

	// PatternText is text that people read (names, SKUs, addresses, metadata):
	// no control character (Unicode Cc: U+0000 to U+001F, U+007F to U+009F),
	// none of the bidirectional embeddings, overrides and isolates (U+202A to
	// U+202E, U+2066 to U+2069), and no zero-width space (U+200B, U+2060,
	// U+FEFF). The zero-width non-joiner and joiner (U+200C, U+200D) stay
	// allowed: Persian, the Indic scripts and emoji need them.
	PatternText = `^[^\x00-\x1F\x7F-\x9F` + "\u200B\u202A-\u202E\u2060\u2066-\u2069\uFEFF" + `]*$`

	// PatternEmail is a plausible address, as sent: local@domain, one @, a
	// domain with a dot that neither starts nor ends it, and no space or
	// control character anywhere. Whether the mailbox exists is not for an
	// API to decide.
	PatternEmail = `^[^@\x00-\x20\x7F-\x9F]+@[^@.\x00-\x20\x7F-\x9F][^@\x00-\x20\x7F-\x9F]*\.[^@\x00-\x20\x7F-\x9F]*[^@.\x00-\x20\x7F-\x9F]$`

	// PatternPaymentMethod is a payment method token: "pm_" and visible
	// ASCII.
	PatternPaymentMethod = `^pm_[\x21-\x7E]*$`
)

var (
	emailRE         = regexp.MustCompile(PatternEmail)
	paymentMethodRE = regexp.MustCompile(PatternPaymentMethod)
)

// The two rules that every order checks on several fields are decided by a
// loop instead of a regular-expression machine, which cost 2% of a create's
// instructions: isText is PatternText and visibleASCII is
// PatternVisibleASCII, and TestLoopsAgreeWithPatterns holds each to its
// pattern's answer for every rune and every byte.

// isText reports whether s matches PatternText.
func isText(s string) bool {
	for _, r := range s {
		if r <= 0x1F || (r >= 0x7F && r <= 0x9F) || r == 0x200B || (r >= 0x202A && r <= 0x202E) ||
			r == 0x2060 || (r >= 0x2066 && r <= 0x2069) || r == 0xFEFF {
			return false
		}
	}
	return true
}

// visibleASCII reports whether s matches PatternVisibleASCII.
func visibleASCII(s string) bool {
	for i := range len(s) {
		if s[i] < 0x21 || s[i] > 0x7E {
			return false
		}
	}
	return true
}

// currencyCodes is every active ISO 4217 code that has a minor unit: the
// ISO list that github.com/bojanz/currency carries (taken from ISO's
// maintenance agency, with CLDR 48's data beside it), funds codes such as
// CLF included, and without XAU, XTS and the other codes with no minor unit,
// which an amount in minor units cannot express. Adding a currency is a
// dependency update, not a product decision: the contract accepts any ISO
// 4217 code.
var currencyCodes = func() map[string]bool {
	m := map[string]bool{}
	for _, code := range currency.GetCurrencyCodes() {
		m[code] = true
	}
	return m
}()

// Currencies returns the currency codes an order may have, sorted.
func Currencies() []string { return sortedSet(currencyCodes) }

// Countries returns the ISO 3166-1 alpha-2 codes a shipping address may
// have, sorted.
func Countries() []string { return sortedSet(countries) }

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// MinorUnits returns the number of decimals of the currency's minor unit
// (2 for BRL, 0 for JPY, 3 for BHD), as ISO 4217 gives it, and false for a
// code that is not accepted.
func MinorUnits(code string) (int, bool) {
	if !currencyCodes[code] {
		return 0, false
	}
	digits, ok := currency.GetDigits(code)
	return int(digits), ok
}
