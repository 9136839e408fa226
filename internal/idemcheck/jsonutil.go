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
