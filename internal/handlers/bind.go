package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemkeys/payments/internal/problem"
)

// decodeJSON reads the request body into dst, a pointer to a request DTO.
// It returns the *http.MaxBytesError of an oversized body as it is, and a
// *requestError for everything the client got wrong. The body's
// Content-Type was checked before (requireJSON, in front of the idempotency
// middleware), so that a body the API cannot read never reserves a key.
func decodeJSON(c *gin.Context, dst any) error {
	// A body the idempotency middleware read already comes as its bytes.
	if whole, ok := c.Request.Body.(interface{ Bytes() []byte }); ok {
		return decodeStrict(whole.Bytes(), dst)
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return &bodyReadError{err: err}
	}
	return decodeStrict(body, dst)
}

// MaxFieldErrors is the most refused fields a validation problem lists;
// error_count then says how many were found.
const MaxFieldErrors = 20

// decodeStrict decodes body into dst, a pointer to a request DTO, as one
// pass over its tokens that binds by the json tags as it reads. It lists
// every wrong field it finds by its full path ("items[1].quantity"), unknown
// members included, at most MaxFieldErrors of them and the count of all; an
// array or object larger than its DTO allows (the maxItems and
// maxProperties tags) is refused at the first element too many and ends the
// decoding there, so that a body of half a million items costs neither
// memory nor an answer of half a million errors.
//
// Required means required, and null means null, as the OpenAPI document
// says (swag reads the same tags): a member is required unless its field is
// tagged validate:"optional", and a missing one is refused by name; null is
// accepted only by a pointer field (the document's nullable members), which
// it leaves nil, and refused everywhere else. A value the client left out
// is never read as its zero value: an item without unit_amount is not an
// item for free.
//
// An empty body is an empty object: the idempotency fingerprint treats the
// two as one request, so the handler must too (and its required members are
// missing). A body of white space only is not JSON.
func decodeStrict(body []byte, dst any) error {
	return decodeStrictAt("", body, dst)
}

// decodeStrictAt is decodeStrict for a body that sits at path inside a
// larger one (a webhook's data.object), so that refused fields carry their
// full path.
func decodeStrictAt(path string, body []byte, dst any) error {
	switch {
	case len(body) == 0:
		body = []byte("{}")
	case len(bytes.TrimSpace(body)) == 0:
		// White space alone is no JSON value: not the empty body of a
		// request that has none.
		return errInvalidJSON
	}
	d := &streamBinder{dec: decoders.Get().(*jsontext.Decoder)}
	d.dec.Reset(bytes.NewReader(body))
	defer func() {
		d.dec.Reset(emptyReader)
		decoders.Put(d.dec)
	}()
	if d.dec.PeekKind() != '{' {
		if _, err := d.dec.ReadValue(); err != nil {
			return errInvalidJSON
		}
		if path != "" {
			return &requestError{fields: []problem.FieldError{{Field: path, Message: "must be an object"}}}
		}
		return &requestError{detail: "The body must be a JSON object."}
	}
	errs, err := d.bind(place{name: path, index: -1}, reflect.ValueOf(dst).Elem(), "")
	if err != nil {
		return errInvalidJSON
	}
	if !d.stopped {
		if _, err := d.dec.ReadToken(); !errors.Is(err, io.EOF) {
			if err == nil {
				return &requestError{detail: "The body must hold exactly one JSON value."}
			}
			return errInvalidJSON
		}
	}
	if errs.count > 0 {
		return &requestError{fields: errs.list, count: errs.count}
	}
	return nil
}

var errInvalidJSON = &requestError{detail: "The body is not valid JSON."}

// decoders keeps the token decoders between requests: a decoder's buffers
// (the names seen in each open object, to refuse a duplicate) grow once
// instead of on every request.
var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(emptyReader) }}

// emptyReader is what a pooled decoder reads between two requests, so that
// it holds on to no request's body.
var emptyReader = bytes.NewReader(nil)

// fieldErrors is a bounded list of refused fields: the first MaxFieldErrors
// in order, and how many were found in all.
type fieldErrors struct {
	list  []problem.FieldError
	count int
}

func (f *fieldErrors) add(path, message string) {
	f.count++
	if len(f.list) < MaxFieldErrors {
		f.list = append(f.list, problem.FieldError{Field: path, Message: message})
	}
}

func (f *fieldErrors) merge(o fieldErrors) {
	f.count += o.count
	room := MaxFieldErrors - len(f.list)
	f.list = append(f.list, o.list[:min(room, len(o.list))]...)
}

// memberErrors are the refused fields under one member of an object.
type memberErrors struct {
	name string
	errs fieldErrors
}

// sortedMembers keeps the refused fields of an object's members in name
// order, so that the same object lists its errors alike whatever order its
// members came in, and keeps no more of them than MaxFieldErrors.
type sortedMembers struct {
	members []memberErrors
	count   int
}

func (s *sortedMembers) add(name string, errs fieldErrors) {
	if errs.count == 0 {
		return
	}
	s.count += errs.count
	i, _ := slices.BinarySearchFunc(s.members, name, func(m memberErrors, name string) int { return strings.Compare(m.name, name) })
	s.members = slices.Insert(s.members, i, memberErrors{name: name, errs: errs})
	// Drop from the end what a bounded list cannot show.
	kept := 0
	for j := range s.members {
		if kept >= MaxFieldErrors {
			s.members = s.members[:j]
			break
		}
		kept += len(s.members[j].errs.list)
	}
}

func (s *sortedMembers) errors() fieldErrors {
	var out fieldErrors
	for _, m := range s.members {
		out.merge(fieldErrors{list: m.errs.list})
	}
	out.count = s.count
	return out
}

// streamBinder binds a token stream to a DTO.
type streamBinder struct {
	dec *jsontext.Decoder
	// stopped: a size limit was hit and decoding ended there.
	stopped bool
}

// openObject is implemented by a DTO whose JSON object may carry members it
// does not declare, which are then skipped instead of refused: the provider's
// webhook events, whose sender (authenticated by the signature) may add
// members on its own schedule. The OpenAPI document leaves the same schemas
// open (scripts/openapifix); every client request is closed.
type openObject interface{ acceptsUnknownMembers() }

var (
	openObjectType = reflect.TypeFor[openObject]()
	rawObjectType  = reflect.TypeFor[json.RawMessage]()
)

// required reports whether a DTO field must be present: all are, unless
// tagged validate:"optional" (swag's --requiredByDefault reads the same tag).
func required(tag reflect.StructTag) bool {
	return !slices.Contains(strings.Split(tag.Get("validate"), ","), "optional")
}

// bind supports what request DTOs are made of: structs with json tags,
// slices, maps with string keys, strings, integers, booleans, pointers, and
// json.RawMessage for an object read later (a webhook's data.object). tag is
// the struct tag of the field being bound, for its size limit. The error is
// a syntax error of the body; refused fields come in the list.
func (d *streamBinder) bind(at place, dst reflect.Value, tag reflect.StructTag) (fieldErrors, error) {
	var errs fieldErrors
	kind := d.dec.PeekKind()
	if kind == 'n' {
		if dst.Kind() != reflect.Pointer {
			return d.refuse(at, "must not be null")
		}
		dst.SetZero()
		_, err := d.dec.ReadToken()
		return errs, err
	}
	if dst.Type() == rawObjectType {
		if kind != '{' {
			return d.refuse(at, "must be an object")
		}
		raw, err := d.dec.ReadValue()
		if err == nil {
			dst.SetBytes(bytes.Clone(raw))
		}
		return errs, err
	}
	switch dst.Kind() {
	case reflect.Pointer:
		if dst.IsNil() {
			dst.Set(reflect.New(dst.Type().Elem()))
		}
		return d.bind(at, dst.Elem(), tag)

	case reflect.Struct:
		return d.bindStruct(at, dst, tag, kind)

	case reflect.Map:
		return d.bindMap(at, dst, tag, kind)

	case reflect.Slice:
		return d.bindSlice(at, dst, tag, kind)

	case reflect.String:
		if kind != '"' {
			return d.refuse(at, "must be a string")
		}
		tok, err := d.dec.ReadToken()
		if err == nil {
			dst.SetString(tok.String())
		}
		return errs, err

	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return d.bindInteger(at, dst, kind)

	case reflect.Bool:
		if kind != 't' && kind != 'f' {
			return d.refuse(at, "must be true or false")
		}
		tok, err := d.dec.ReadToken()
		if err == nil {
			dst.SetBool(tok.Bool())
		}
		return errs, err

	default:
		// A DTO with a field kind the binder does not know is a programming
		// error, found by the first test that sends it.
		panic(fmt.Sprintf("handlers: cannot bind JSON to %s at %q", dst.Type(), at))
	}
}

// bindStruct binds an object to a DTO struct: every member it declares,
// none it does not (unless the DTO is an openObject), every required one.
func (d *streamBinder) bindStruct(at place, dst reflect.Value, tag reflect.StructTag, kind jsontext.Kind) (fieldErrors, error) {
	if kind != '{' {
		return d.refuse(at, "must be an object")
	}
	info := structInfoOf(dst.Type())
	seen := make([]bool, len(info.fields))
	path := at.String()
	var members sortedMembers
	err := d.object(at, tag, func(name []byte) error {
		i, known := info.byName[string(name)]
		if !known {
			if !info.open {
				var e fieldErrors
				e.add(join(path, string(name)), "is not a known field")
				members.add(string(name), e)
			}
			return d.dec.SkipValue()
		}
		seen[i] = true
		f := &info.fields[i]
		e, err := d.bind(place{parent: path, name: f.name, index: -1}, dst.Field(f.index), f.tag)
		members.add(f.name, e)
		return err
	}, &members)
	if err == nil && !d.stopped {
		for i, f := range info.fields {
			if !seen[i] && f.required {
				var e fieldErrors
				e.add(join(path, f.name), "is required")
				members.add(f.name, e)
			}
		}
	}
	return members.errors(), err
}

// bindMap binds an object to a map with string keys.
func (d *streamBinder) bindMap(at place, dst reflect.Value, tag reflect.StructTag, kind jsontext.Kind) (fieldErrors, error) {
	if kind != '{' {
		return d.refuse(at, "must be an object")
	}
	m := reflect.MakeMap(dst.Type())
	path := at.String()
	var members sortedMembers
	err := d.object(at, tag, func(raw []byte) error {
		name := string(raw)
		elem := reflect.New(dst.Type().Elem()).Elem()
		e, err := d.bind(place{parent: path, name: name, index: -1}, elem, "")
		members.add(name, e)
		m.SetMapIndex(reflect.ValueOf(name).Convert(dst.Type().Key()), elem)
		return err
	}, &members)
	dst.Set(m)
	return members.errors(), err
}

// bindSlice binds an array to a slice, refusing more items than the tag's
// maxItems at the first one too many, which ends the decoding there.
func (d *streamBinder) bindSlice(at place, dst reflect.Value, tag reflect.StructTag, kind jsontext.Kind) (fieldErrors, error) {
	if kind != '[' {
		return d.refuse(at, "must be an array")
	}
	var errs fieldErrors
	if _, err := d.dec.ReadToken(); err != nil {
		return errs, err
	}
	limit := tagLimit(tag, "maxItems")
	path := at.String()
	s := reflect.MakeSlice(dst.Type(), 0, 0)
	for i := 0; ; i++ {
		if k, err := d.next(']'); k == ']' || err != nil {
			if err == nil {
				break
			}
			return errs, err
		}
		if limit > 0 && i == limit {
			// First in the list: the size is what is wrong, and the
			// elements' own errors (required members of {} items) would
			// otherwise fill it.
			var first fieldErrors
			first.add(path, fmt.Sprintf("must contain at most %d items", limit))
			first.merge(errs)
			d.stopped = true
			dst.Set(s)
			return first, nil
		}
		s = reflect.Append(s, reflect.New(dst.Type().Elem()).Elem())
		e, err := d.bind(place{parent: path, index: i}, s.Index(i), "")
		errs.merge(e)
		if err != nil || d.stopped {
			dst.Set(s)
			return errs, err
		}
	}
	_, err := d.dec.ReadToken()
	dst.Set(s)
	return errs, err
}

// bindInteger binds a number to an integer field: a whole number in the
// field's range.
func (d *streamBinder) bindInteger(at place, dst reflect.Value, kind jsontext.Kind) (fieldErrors, error) {
	if kind != '0' {
		return d.refuse(at, "must be an integer")
	}
	var errs fieldErrors
	raw, err := d.dec.ReadValue()
	if err != nil {
		return errs, err
	}
	n, err := jsonInteger(string(raw))
	switch {
	case errors.Is(err, errNotWhole):
		errs.add(at.String(), "must be a whole number")
	case err != nil, dst.OverflowInt(n):
		errs.add(at.String(), "is out of range")
	default:
		dst.SetInt(n)
	}
	return errs, nil
}

// refuse lists message for the value at and skips it.
func (d *streamBinder) refuse(at place, message string) (fieldErrors, error) {
	var errs fieldErrors
	errs.add(at.String(), message)
	return errs, d.dec.SkipValue()
}

// object reads an object's members, calling member for each name with the
// decoder at its value, and refuses more members than the tag's
// maxProperties at the first one too many, ending the decoding there. The
// name member is given is only valid until it reads the value.
func (d *streamBinder) object(at place, tag reflect.StructTag, member func(name []byte) error, members *sortedMembers) error {
	if _, err := d.dec.ReadToken(); err != nil {
		return err
	}
	limit := tagLimit(tag, "maxProperties")
	var unquoted []byte
	for n := 0; ; n++ {
		if k, err := d.next('}'); k == '}' || err != nil {
			if err == nil {
				break
			}
			return err
		}
		if limit > 0 && n == limit {
			var e fieldErrors
			e.add(at.String(), fmt.Sprintf("must have at most %d keys", limit))
			members.add("", e)
			d.stopped = true
			return nil
		}
		// The name as read, quotes off, unless it holds an escape: no copy
		// of a plain name (a token's String would make one).
		raw, err := d.dec.ReadValue()
		if err != nil {
			return err
		}
		name := raw[1 : len(raw)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			if unquoted, err = jsontext.AppendUnquote(unquoted[:0], raw); err != nil {
				return err
			}
			name = unquoted
		}
		if err := member(name); err != nil || d.stopped {
			return err
		}
	}
	_, err := d.dec.ReadToken()
	return err
}

// place is where a value sits in the body ("items[1].quantity"), spelled
// only when an error names it or a value inside it needs it: a member
// (index -1) or an array element of parent.
type place struct {
	parent, name string
	index        int
}

func (p place) String() string {
	if p.index >= 0 {
		return p.parent + "[" + strconv.Itoa(p.index) + "]"
	}
	return join(p.parent, p.name)
}

// next peeks at the next token: end is the closing delimiter the caller
// waits for. A syntax error comes back as the error.
func (d *streamBinder) next(end jsontext.Kind) (jsontext.Kind, error) {
	k := d.dec.PeekKind()
	if k == 0 {
		_, err := d.dec.ReadToken()
		if err == nil {
			err = errors.New("unexpected end of the body")
		}
		return 0, err
	}
	return k, nil
}

// tagLimit reads a size limit from a struct tag; 0 when there is none.
func tagLimit(tag reflect.StructTag, name string) int {
	v, ok := tag.Lookup(name)
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(v)
	return n
}

// jsonField is a struct field as the binder sees it.
type jsonField struct {
	name     string // its JSON name
	index    int
	tag      reflect.StructTag
	required bool
}

// structInfo is what the binder needs of a DTO type, read once from its
// fields and tags.
type structInfo struct {
	fields []jsonField    // exported fields with a JSON name, in order
	byName map[string]int // a JSON name's place in fields
	open   bool           // it implements openObject
}

// structInfos holds the structInfo of every DTO type met so far.
var structInfos sync.Map // reflect.Type -> *structInfo

// structInfoOf returns t's structInfo, read on first use.
func structInfoOf(t reflect.Type) *structInfo {
	if info, ok := structInfos.Load(t); ok {
		return info.(*structInfo)
	}
	info := &structInfo{byName: map[string]int{}, open: t.Implements(openObjectType)}
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
		info.byName[name] = len(info.fields)
		info.fields = append(info.fields, jsonField{name: name, index: i, tag: f.Tag, required: required(f.Tag)})
	}
	stored, _ := structInfos.LoadOrStore(t, info)
	return stored.(*structInfo)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// decimalNumber is the spelling of a number in a query parameter: what a
// JSON number allows, and also a sign, leading zeros and a bare point ("+5",
// "05", "5.", ".5e1"), as OpenAPI validators read an integer parameter.
var decimalNumber = regexp.MustCompile(`^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$`)

// queryInteger reads an integer query parameter under the rule of request
// bodies: any spelling of a whole number (10, 10.0, 1e1), exactly, so that a
// client that builds its query from a JSON number is read as it meant. It
// returns errNotWhole for a fraction and errOutOfRange beyond int64 or for
// something that is not a number at all.
func queryInteger(raw string) (int64, error) {
	if !decimalNumber.MatchString(raw) {
		return 0, errOutOfRange
	}
	return jsonInteger(raw)
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
