package idemcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// These small JSON helpers are written here rather than taken from a
// library because the checker imports nothing but the standard library, so
// that `go install` of it builds nothing else.

// member is one top-level member of a JSON object, its name and value
// byte for byte as the body wrote them.
type member struct {
	name, value []byte
}

// members returns the top-level members of body, a JSON object. ok is
// false when body is not an object of two members or more, or repeats a
// member's name (whose meaning would then hang on the order).
func members(body []byte) (ms []member, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	seen := map[string]bool{}
	for dec.More() {
		start := dec.InputOffset()
		t, err := dec.Token()
		name, isString := t.(string)
		if err != nil || !isString || seen[name] {
			return nil, false
		}
		seen[name] = true
		// The name's bytes as written: what the token read, less the
		// separator and whitespace before it.
		raw := bytes.TrimLeft(body[start:dec.InputOffset()], " \t\r\n,")
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		ms = append(ms, member{name: raw, value: v})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) || len(ms) < 2 {
		return nil, false
	}
	return ms, true
}

// reorder returns body, a JSON object, with its top-level members in
// reverse order and no whitespace between them, names and values kept byte
// for byte: the same request in canonical JSON (RFC 8785), other bytes,
// and no change but the order. ok is false when members refuses body.
func reorder(body []byte) (out []byte, ok bool) {
	ms, ok := members(body)
	if !ok {
		return nil, false
	}
	var b bytes.Buffer
	b.WriteString("{")
	for i := len(ms) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "%s:%s", ms[i].name, ms[i].value)
		if i > 0 {
			b.WriteString(",")
		}
	}
	b.WriteString("}")
	return b.Bytes(), !bytes.Equal(b.Bytes(), body)
}

// spaced returns body, a JSON object, with whitespace added around its
// top-level members, kept in their order with names and values byte for
// byte: the same request, other bytes, and no change but whitespace. ok is
// false when members refuses body, or body is already so spaced.
func spaced(body []byte) (out []byte, ok bool) {
	ms, ok := members(body)
	if !ok {
		return nil, false
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, m := range ms {
		fmt.Fprintf(&b, "    %s :  %s", m.name, m.value)
		if i < len(ms)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.Bytes(), !bytes.Equal(b.Bytes(), body)
}

// looseVariant is the body with one value replaced by one that is loosely
// equal to it (JavaScript's ==, and what an endpoint that compares bodies
// after coercion takes for the same).
type looseVariant struct {
	what string // "quantity 2 sent as \"2\""
	body []byte
}

// looseForms are the replacements looseVariants makes, in the order it
// tries them: each applies to the first value of its kind in the body.
var looseForms = []struct {
	applies func(literal string) bool
	to      func(literal string) string
}{
	{func(l string) bool { return isNumber(l) && l != "0" && l != "1" }, strconv.Quote}, // 2 as "2"
	{func(l string) bool { return l == "0" }, func(string) string { return `""` }},      // 0 as ""
	{func(l string) bool { return l == "1" }, func(string) string { return "true" }},    // 1 as true
	{func(l string) bool { return l == "true" }, func(string) string { return "1" }},    // true as 1
	{func(l string) bool { return l == "false" }, func(string) string { return "0" }},   // false as 0
}

// maxLooseVariants bounds the requests reuse-loose sends.
const maxLooseVariants = 3

func isNumber(literal string) bool {
	return literal != "" && (literal[0] == '-' || literal[0] >= '0' && literal[0] <= '9')
}

// looseVariants returns up to maxLooseVariants copies of body, a JSON
// document, each with one scalar replaced by a loosely equal value of
// another type, every other byte kept: a request that differs from the
// original in value, which an endpoint comparing values loosely answers
// as the original. None when body is not JSON or holds no such scalar.
func looseVariants(body []byte) []looseVariant {
	type scalar struct {
		name       string // the member it is the value of, or inside
		start, end int64
	}
	var scalars []scalar
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	// Which strings are member names: an object expects a name after '{'
	// and after each of its values. A value is named after the member it
	// is, or is inside (an array's elements after the array's member).
	type frame struct {
		object, expectName bool
		name               string
	}
	var stack []frame
	here := func() string {
		if n := len(stack); n > 0 {
			return stack[n-1].name
		}
		return ""
	}
	afterValue := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expectName = true
		}
	}
	for {
		t, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil
		}
		end := dec.InputOffset()
		switch v := t.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				stack = append(stack, frame{object: v == '{', expectName: v == '{', name: here()})
			default:
				stack = stack[:len(stack)-1]
				afterValue()
			}
			continue
		case string:
			if n := len(stack); n > 0 && stack[n-1].expectName {
				stack[n-1].name, stack[n-1].expectName = v, false
				continue
			}
		case json.Number:
			scalars = append(scalars, scalar{here(), end - int64(len(v)), end})
		case bool:
			scalars = append(scalars, scalar{here(), end - int64(len(fmt.Sprint(v))), end})
		}
		afterValue()
	}
	var out []looseVariant
	for _, form := range looseForms {
		for _, sc := range scalars {
			literal := string(body[sc.start:sc.end])
			if !form.applies(literal) {
				continue
			}
			replaced := form.to(literal)
			b := append(append(append([]byte(nil), body[:sc.start]...), replaced...), body[sc.end:]...)
			what := literal + " sent as " + replaced
			if sc.name != "" {
				what = sc.name + " " + what
			}
			out = append(out, looseVariant{what: what, body: b})
			break
		}
		if len(out) == maxLooseVariants {
			break
		}
	}
	return out
}

// countAt reads the effects count from doc at an RFC 6901 pointer: a
// non-negative integer, or an array whose length is the count.
func countAt(doc []byte, pointer string) (int, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return 0, fmt.Errorf("the effects answer is not JSON: %w", err)
	}
	if pointer != "" {
		if !strings.HasPrefix(pointer, "/") {
			return 0, fmt.Errorf("JSON pointer %q must start with /", pointer)
		}
		for _, token := range strings.Split(pointer[1:], "/") {
			token = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
			switch node := v.(type) {
			case map[string]any:
				next, ok := node[token]
				if !ok {
					return 0, fmt.Errorf("JSON pointer %q: no member %q", pointer, token)
				}
				v = next
			case []any:
				i, err := strconv.Atoi(token)
				if err != nil || i < 0 || i >= len(node) {
					return 0, fmt.Errorf("JSON pointer %q: no element %q", pointer, token)
				}
				v = node[i]
			default:
				return 0, fmt.Errorf("JSON pointer %q: %q is inside a scalar", pointer, token)
			}
		}
	}
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
			return 0, fmt.Errorf("the count %s is not a non-negative integer", x)
		}
		return int(f), nil
	case []any:
		return len(x), nil
	}
	return 0, fmt.Errorf("JSON pointer %q names neither a number nor an array", pointer)
}

// jsonID returns the top-level "id" member of a JSON object body, or "".
func jsonID(body []byte) string {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	raw, ok := doc["id"]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// bodyDiff says where body b differs from a, for a reason: the top-level
// members whose values differ when both are JSON objects ("in
// \"created_at\""), else the first byte that differs.
func bodyDiff(a, b []byte) string {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) == nil && json.Unmarshal(b, &mb) == nil {
		var names []string
		for k, v := range ma {
			if w, ok := mb[k]; !ok || !bytes.Equal(v, w) {
				names = append(names, strconv.Quote(k))
			}
		}
		for k := range mb {
			if _, ok := ma[k]; !ok {
				names = append(names, strconv.Quote(k))
			}
		}
		sort.Strings(names)
		if len(names) > 0 {
			return "in " + strings.Join(names, ", ")
		}
		return "in its bytes only (the same members and values)"
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("from byte %d (%d bytes, first %d)", i, len(b), len(a))
}

// problemCode returns the "code" (or else "title") member of a problem body,
// to name an answer in a reason.
func problemCode(body []byte) string {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	for _, k := range []string{"code", "title", "error", "message"} {
		if s, ok := doc[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
