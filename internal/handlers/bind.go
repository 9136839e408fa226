package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/problem"
)

// decodeJSON reads the request body into dst, a pointer to a request DTO.
// It returns the *http.MaxBytesError of an oversized body as it is, and a
// *requestError for everything the client got wrong.
//
// A body declared as anything but JSON (a form, text/plain) is refused even
// when its bytes happen to be JSON: the client meant something else, or a
// browser form on another site is posting to the API. A body without a
// Content-Type is read as JSON, as most HTTP clients send it that way.
func decodeJSON(c *gin.Context, dst any) error {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if ct := c.GetHeader("Content-Type"); ct != "" && len(bytes.TrimSpace(body)) > 0 && !isJSONContentType(ct) {
		return errNotJSON
	}
	return decodeStrict(body, dst)
}

// errNotJSON refuses a body whose Content-Type is not JSON.
var errNotJSON = &requestError{fields: []problem.FieldError{{
	Field: "Content-Type", Message: "must be application/json",
}}}

// decodeStrict decodes body into dst in two steps: first into a JSON tree,
// then the tree into dst by its json tags. encoding/json alone would stop at
// the first problem and name fields without their array index ("items.quantity");
// walking the tree lets the answer list every wrong field at once, by its
// full path ("items[1].quantity"), unknown members included.
//
// An empty body is an empty object: the idempotency fingerprint treats the
// two as one request, so the handler must too. JSON null leaves a field at
// its zero value, which the domain then judges ("is required").
func decodeStrict(body []byte, dst any) error {
	var tree any = map[string]any{}
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		// Numbers stay text, so that integers are read exactly, beyond
		// float64's 53 bits.
		dec.UseNumber()
		if err := dec.Decode(&tree); err != nil {
			return &requestError{detail: "The body is not valid JSON."}
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return &requestError{detail: "The body must hold exactly one JSON value."}
		}
	}
	if _, ok := tree.(map[string]any); !ok {
		return &requestError{detail: "The body must be a JSON object."}
	}
	var b binder
	b.bind("", tree, reflect.ValueOf(dst).Elem())
	if len(b.fields) > 0 {
		return &requestError{fields: b.fields}
	}
	return nil
}

// binder assigns a JSON tree to a Go value and collects what does not fit.
type binder struct {
	fields []problem.FieldError
}

func (b *binder) refuse(path, message string) {
	b.fields = append(b.fields, problem.FieldError{Field: path, Message: message})
}

// bind supports what request DTOs are made of: structs with json tags,
// slices, maps with string keys, strings, integers, booleans and pointers.
func (b *binder) bind(path string, v any, dst reflect.Value) {
	if v == nil {
		return
	}
	switch dst.Kind() {
	case reflect.Pointer:
		if dst.IsNil() {
			dst.Set(reflect.New(dst.Type().Elem()))
		}
		b.bind(path, v, dst.Elem())

	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			b.refuse(path, "must be an object")
			return
		}
		fields := jsonFields(dst.Type())
		// Sorted, so that the same body always lists its errors alike.
		for _, name := range slices.Sorted(maps.Keys(obj)) {
			i, known := fields[name]
			if !known {
				b.refuse(join(path, name), "is not a known field")
				continue
			}
			b.bind(join(path, name), obj[name], dst.Field(i))
		}

	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			b.refuse(path, "must be an object")
			return
		}
		m := reflect.MakeMapWithSize(dst.Type(), len(obj))
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			elem := reflect.New(dst.Type().Elem()).Elem()
			b.bind(join(path, k), obj[k], elem)
			m.SetMapIndex(reflect.ValueOf(k).Convert(dst.Type().Key()), elem)
		}
		dst.Set(m)

	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			b.refuse(path, "must be an array")
			return
		}
		s := reflect.MakeSlice(dst.Type(), len(arr), len(arr))
		for i, elem := range arr {
			b.bind(fmt.Sprintf("%s[%d]", path, i), elem, s.Index(i))
		}
		dst.Set(s)

	case reflect.String:
		s, ok := v.(string)
		if !ok {
			b.refuse(path, "must be a string")
			return
		}
		dst.SetString(s)

	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		num, ok := v.(json.Number)
		if !ok {
			b.refuse(path, "must be an integer")
			return
		}
		n, err := jsonInteger(string(num))
		switch {
		case errors.Is(err, errNotWhole):
			b.refuse(path, "must be a whole number")
		case err != nil, dst.OverflowInt(n):
			b.refuse(path, "is out of range")
		default:
			dst.SetInt(n)
		}

	case reflect.Bool:
		t, ok := v.(bool)
		if !ok {
			b.refuse(path, "must be true or false")
			return
		}
		dst.SetBool(t)

	default:
		// A DTO with a field kind the binder does not know is a programming
		// error, found by the first test that sends it.
		panic(fmt.Sprintf("handlers: cannot bind JSON to %s at %q", dst.Type(), path))
	}
}

// jsonFields maps the JSON names of a struct's exported fields to their
// index.
func jsonFields(t reflect.Type) map[string]int {
	fields := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		fields[name] = i
	}
	return fields
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

var (
	errNotWhole   = errors.New("not a whole number")
	errOutOfRange = errors.New("out of int64 range")
)

// jsonInteger reads a JSON number literal as an int64. Every spelling of a
// whole number is accepted (2, 2.0, 2e0, 0.2e1, 200e-2): the idempotency
// fingerprint (RFC 8785) treats them as one value, so they must mean one
// thing here too. It works on the decimal digits, never through float64, so
// it is exact across the whole int64 range, and it does no arithmetic on the
// exponent's size, so 1e999999999 costs nothing.
//
// It returns errNotWhole for a fraction and errOutOfRange beyond int64.
func jsonInteger(lit string) (int64, error) {
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n, nil
	}
	sign := ""
	if strings.HasPrefix(lit, "-") {
		sign, lit = "-", lit[1:]
	}
	mantissa, expText, hasExp := strings.Cut(strings.ToLower(lit), "e")
	intPart, frac, _ := strings.Cut(mantissa, ".")

	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, nil // any spelling of zero
	}
	// value = digits × 10^shift, digits without leading or trailing zeros.
	trimmed := strings.TrimRight(digits, "0")
	shift := int64(len(digits)-len(trimmed)) - int64(len(frac))
	digits = trimmed
	if hasExp {
		exp, err := strconv.ParseInt(expText, 10, 32)
		if err != nil {
			// Beyond ±2^31: astronomically large or small.
			if strings.HasPrefix(expText, "-") {
				return 0, errNotWhole
			}
			return 0, errOutOfRange
		}
		shift += exp
	}
	switch {
	case shift < 0:
		return 0, errNotWhole
	case int64(len(digits))+shift > 19: // int64 has at most 19 digits
		return 0, errOutOfRange
	}
	n, err := strconv.ParseInt(sign+digits+strings.Repeat("0", int(shift)), 10, 64)
	if err != nil {
		return 0, errOutOfRange
	}
	return n, nil
}
