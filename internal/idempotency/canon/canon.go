package idempotency

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
	// maxBodyDepth bounds how deeply a body's arrays and objects may nest.
	// No request of the API comes near it (an order is three levels deep).
	maxBodyDepth = 32
	// maxBodyMembers bounds the object members of a whole body. An order
	// of 100 items has about 500.
	maxBodyMembers = 10_000
	// maxBodyString bounds one string of a body (a name or a value, as
	// sent, escapes included), in bytes.
	maxBodyString = 64 << 10
)

// limits bound the work of canonicalizing a body. Zero fields take the
// defaults above; a negative field lifts its cap (for benchmarks).
type limits struct {
	MaxDepth   int
	MaxMembers int
	MaxString  int
}

func (l limits) withDefaults() limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxDepth, maxBodyDepth)
	def(&l.MaxMembers, maxBodyMembers)
	def(&l.MaxString, maxBodyString)
	return l
}

// bodyLimits are the caps every keyed request's body is held to.
var bodyLimits = limits{}.withDefaults()

// canonicalize returns body as canonical JSON (RFC 8785, JCS): members
// sorted by their UTF-16 code units, no insignificant whitespace, numbers
// and strings in one spelling. An empty body canonicalizes to "{}" so that
// "no body" and "empty object" are one request. It returns an error wrapping
// ErrMalformedBody for invalid JSON, for an object that repeats a member
// name, for a number outside IEEE 754 double range, and for a body beyond
// the default limits.
func canonicalize(body []byte) ([]byte, error) {
	return limits{}.canonicalize(context.Background(), body)
}

// canonicalize is the package's canonicalize under these limits. It gives
// up with ctx's error when ctx ends (the client went away) before it is
// done.
func (l limits) canonicalize(ctx context.Context, body []byte) ([]byte, error) {
	l = l.withDefaults()
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return []byte("{}"), nil
	}
	if !utf8.Valid(trimmed) {
		// I-JSON (RFC 7493), which JCS builds on, is UTF-8 only; invalid
		// bytes would otherwise be fingerprinted as they come.
		return nil, fmt.Errorf("%w: the body is not valid UTF-8", ErrMalformedBody)
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
		return nil, fmt.Errorf("%w: %s", ErrMalformedBody, reason)
	}
	return out, nil
}

// checkEvery is how many bytes the scan reads between two looks at ctx.
const checkEvery = 64 << 10

// check walks the body once and refuses what is beyond the limits: too
// deep, too many members, a string too long, a number no double holds. It
// does not validate the syntax (the canonicalizer does), so on invalid JSON
// it only has to end.
func (l limits) check(ctx context.Context, body []byte) error {
	depth, members := 0, 0
	for i := 0; i < len(body); i++ {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		switch b := body[i]; {
		case b == '"':
			end := stringEnd(body, i)
			if l.MaxString > 0 && end-i-1 > l.MaxString {
				return fmt.Errorf("%w: a string of the body is longer than %d bytes", ErrMalformedBody, l.MaxString)
			}
			i = end
		case b == '{' || b == '[':
			depth++
			if l.MaxDepth > 0 && depth > l.MaxDepth {
				return fmt.Errorf("%w: the body nests more than %d levels deep", ErrMalformedBody, l.MaxDepth)
			}
		case b == '}' || b == ']':
			depth--
		case b == ':':
			members++
			if l.MaxMembers > 0 && members > l.MaxMembers {
				return fmt.Errorf("%w: the body has more than %d object members", ErrMalformedBody, l.MaxMembers)
			}
		case b == '-' || (b >= '0' && b <= '9'):
			end := i + 1
			for end < len(body) && numberByte(body[end]) {
				end++
			}
			if outOfRange(body[i:end]) {
				return fmt.Errorf("%w: a number of the body is outside the range of a double", ErrMalformedBody)
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
