// Package canon is canonical JSON (RFC 8785, JCS) for the idempotency
// core's fingerprints, in O(n log n) and within caps a request's body is
// held to, and the digest they are hashed with (Digest).
package canon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Canonical JSON (RFC 8785, JCS) is what the fingerprint hashes, so that
// member order, whitespace, number spelling and string escapes do not make
// two requests differ. It runs on every keyed request before any lookup
// (but a retry that sends the very bytes of a request this process
// completed, known by their digest: Keeper.request), so its cost is
// bounded: linear scans, a sort of each object's members in O(n log n), and
// caps on what a body may hold.

// The caps of a body (limits).
const (
	// DefaultMaxDepth bounds how deeply a body's arrays and objects may nest.
	// No request of the API comes near it (an order is three levels deep).
	DefaultMaxDepth = 32
	// DefaultMaxMembers bounds the object members of a whole body. An order
	// of 100 items has about 500.
	DefaultMaxMembers = 10_000
	// DefaultMaxString bounds one string of a body (a name or a value, as
	// sent, escapes included), in bytes.
	DefaultMaxString = 64 << 10
)

// Error is a body canonicalize refuses, and why.
type Error struct{ Reason string }

func (e *Error) Error() string { return "malformed JSON body: " + e.Reason }

func refuse(format string, args ...any) error { return &Error{Reason: fmt.Sprintf(format, args...)} }

// Limits bound the work of canonicalizing a body. Zero fields take the
// defaults above; a negative field lifts its cap (for benchmarks).
type Limits struct {
	MaxDepth   int
	MaxMembers int
	MaxString  int
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxDepth, DefaultMaxDepth)
	def(&l.MaxMembers, DefaultMaxMembers)
	def(&l.MaxString, DefaultMaxString)
	return l
}

// Canonicalize returns body as canonical JSON (RFC 8785, JCS): members
// sorted by their UTF-16 code units, no insignificant whitespace, numbers
// and strings in one spelling. An empty body canonicalizes to "{}" so that
// "no body" and "empty object" are one request. It returns an *Error for
// invalid JSON, for an object that repeats a member name, for a number
// outside IEEE 754 double range, and for a body beyond the default limits.
func Canonicalize(body []byte) ([]byte, error) {
	return Limits{}.Canonicalize(context.Background(), body)
}

// Canonicalize is the package's Canonicalize under these limits. It gives
// up with ctx's error when ctx ends (the client went away) before it is
// done.
func (l Limits) Canonicalize(ctx context.Context, body []byte) ([]byte, error) {
	l = l.withDefaults()
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return []byte("{}"), nil
	}
	if !utf8.Valid(trimmed) {
		// I-JSON (RFC 7493), which JCS builds on, is UTF-8 only; invalid
		// bytes would otherwise be fingerprinted as they come.
		return nil, refuse("the body is not valid UTF-8")
	}
	// The caps first, in one cheap pass, so that a body beyond them costs
	// no more than reading it; the canonicalizer validates the syntax.
	if err := l.check(ctx, trimmed); err != nil {
		return nil, err
	}
	out := jsontext.Value(bytes.Clone(trimmed))
	// A lone surrogate escape ("\ud800") is refused, as by the library that
	// computed the fingerprints stored before.
	if err := out.Canonicalize(); err != nil {
		reason := "the body is not valid JSON"
		var se *jsontext.SyntacticError
		if errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName) {
			reason = "the body repeats a member name"
		}
		return nil, refuse("%s", reason)
	}
	return out, nil
}

// checkEvery is how many bytes the scan reads between two looks at ctx.
const checkEvery = 64 << 10

// check walks the body once and refuses what is beyond the limits: too
// deep, too many members, a string too long, a number no double holds. It
// does not validate the syntax (the canonicalizer does), so on invalid JSON
// it only has to end.
func (l Limits) check(ctx context.Context, body []byte) error {
	depth, members := 0, 0
	for i := 0; i < len(body); i++ {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		switch b := body[i]; {
		case b == '"':
			end := stringEnd(body, i)
			if l.MaxString > 0 && end-i-1 > l.MaxString {
				return refuse("a string of the body is longer than %d bytes", l.MaxString)
			}
			i = end
		case b == '{' || b == '[':
			depth++
			if l.MaxDepth > 0 && depth > l.MaxDepth {
				return refuse("the body nests more than %d levels deep", l.MaxDepth)
			}
		case b == '}' || b == ']':
			depth--
		case b == ':':
			members++
			if l.MaxMembers > 0 && members > l.MaxMembers {
				return refuse("the body has more than %d object members", l.MaxMembers)
			}
		case b == '-' || (b >= '0' && b <= '9'):
			end := i + 1
			for end < len(body) && numberByte(body[end]) {
				end++
			}
			if outOfRange(body[i:end]) {
				return refuse("a number of the body is outside the range of a double")
			}
			i = end - 1
		}
	}
	return nil
}

// outOfRange reports whether a number literal is beyond what a double
// holds (1e400), which RFC 8785 cannot spell. Only a literal with an
// exponent or of more than 300 characters can be, so most are not parsed.
func outOfRange(lit []byte) bool {
	if len(lit) <= 300 && !bytes.ContainsAny(lit, "eE") {
		return false
	}
	_, err := strconv.ParseFloat(string(lit), 64)
	return errors.Is(err, strconv.ErrRange)
}

// stringEnd returns the index of the quote that closes the string opening
// at body[start], or the last index when nothing closes it.
func stringEnd(body []byte, start int) int {
	for i := start + 1; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(body) - 1
}

func numberByte(b byte) bool {
	return (b >= '0' && b <= '9') || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E'
}
