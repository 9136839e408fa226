package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries a webhook's signature:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">".
const SignatureHeader = "Provider-Signature"

// DefaultSignatureTolerance is how far a signature's timestamp may be from
// the receiver's clock, either way, before it is refused as a replay.
const DefaultSignatureTolerance = 5 * time.Minute

// maxSignatureHeaderLength bounds the work a hostile header can cause. A real
// one is about 80 bytes; a few signatures (during a secret rotation) fit.
const maxSignatureHeaderLength = 1024

// Errors of VerifySignature. Every one of them wraps ErrInvalidSignature, so
// a receiver that only needs to answer 401 checks for that one.
var (
	// ErrInvalidSignature: the request must not be trusted.
	ErrInvalidSignature = errors.New("invalid webhook signature")
	// ErrSignatureMissing: there is no signature header.
	ErrSignatureMissing = fmt.Errorf("%w: header missing", ErrInvalidSignature)
	// ErrSignatureMalformed: the header cannot be parsed.
	ErrSignatureMalformed = fmt.Errorf("%w: header malformed", ErrInvalidSignature)
	// ErrSignatureMismatch: no v1 signature matches the body and secret.
	ErrSignatureMismatch = fmt.Errorf("%w: no matching signature", ErrInvalidSignature)
	// ErrSignatureExpired: the signature is genuine but its timestamp is
	// further from now than the tolerance, in the past or the future.
	ErrSignatureExpired = fmt.Errorf("%w: timestamp outside tolerance", ErrInvalidSignature)
)

// Sign returns the Provider-Signature header value for body, signed with
// secret at time t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(signatureMAC(secret, ts, body))
}

// VerifySignature checks a Provider-Signature header against the raw body,
// as received, before it is parsed. It returns nil when one of the header's
// v1 signatures is the HMAC of "<t>.<body>" under secret and t lies within
// tolerance of now, either way (tolerance <= 0 means
// DefaultSignatureTolerance). The timestamp is part of what is signed, so an
// attacker cannot refresh an old request's timestamp; the tolerance is what
// stops replays of a captured request.
//
// Errors: ErrSignatureMissing, ErrSignatureMalformed, ErrSignatureMismatch,
// ErrSignatureExpired, each wrapping ErrInvalidSignature; an empty secret is
// refused with an error wrapping ErrInvalidSignature too, so a missing
// configuration fails closed.
func VerifySignature(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if secret == "" {
		return fmt.Errorf("%w: no secret configured", ErrInvalidSignature)
	}
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	sig, err := parseSignatureHeader(header)
	if err != nil {
		return err
	}

	// The MAC first: a forgery is a mismatch whatever its timestamp, and only
	// a genuine signature earns the more precise "expired". hmac.Equal takes
	// constant time, so the comparison leaks nothing about the right MAC.
	want := signatureMAC(secret, sig.timestamp, body)
	matched := false
	for _, got := range sig.v1 {
		if hmac.Equal(got, want) {
			matched = true
		}
	}
	if !matched {
		return ErrSignatureMismatch
	}

	// Whole seconds, in integers: no overflow for any timestamp that parsed.
	skew := now.Unix() - sig.unix
	if limit := int64(tolerance / time.Second); skew > limit || skew < -limit {
		return fmt.Errorf("%w: signed at %d, %ds from now", ErrSignatureExpired, sig.unix, skew)
	}
	return nil
}

func signatureMAC(secret, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

type parsedSignature struct {
	timestamp string // as sent: the MAC covers these exact digits
	unix      int64
	v1        [][]byte
}

// parseSignatureHeader reads "t=…,v1=…[,v1=…]". Several v1 entries let the
// sender sign with an old and a new secret during a rotation; other schemes
// (v0, v2) are skipped so they can be added later without breaking
// receivers. Everything else that is off is malformed.
func parseSignatureHeader(header string) (parsedSignature, error) {
	if header == "" {
		return parsedSignature{}, ErrSignatureMissing
	}
	if len(header) > maxSignatureHeaderLength {
		return parsedSignature{}, fmt.Errorf("%w: longer than %d bytes", ErrSignatureMalformed, maxSignatureHeaderLength)
	}
	var sig parsedSignature
	for part := range strings.SplitSeq(header, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return parsedSignature{}, fmt.Errorf("%w: %q is not name=value", ErrSignatureMalformed, part)
		}
		switch name {
		case "t":
			if sig.timestamp != "" {
				return parsedSignature{}, fmt.Errorf("%w: more than one t", ErrSignatureMalformed)
			}
			unix, err := parseUnixSeconds(value)
			if err != nil {
				return parsedSignature{}, fmt.Errorf("%w: t: %w", ErrSignatureMalformed, err)
			}
			sig.timestamp, sig.unix = value, unix
		case "v1":
			mac, err := hex.DecodeString(value)
			if err != nil || len(mac) != sha256.Size {
				return parsedSignature{}, fmt.Errorf("%w: v1 is not %d hex bytes", ErrSignatureMalformed, sha256.Size)
			}
			sig.v1 = append(sig.v1, mac)
		}
	}
	if sig.timestamp == "" || len(sig.v1) == 0 {
		return parsedSignature{}, fmt.Errorf("%w: t and v1 are both required", ErrSignatureMalformed)
	}
	return sig, nil
}

// parseUnixSeconds accepts plain decimal digits only (no sign, no spaces),
// at most 18 of them, so the value always fits an int64.
func parseUnixSeconds(s string) (int64, error) {
	if s == "" || len(s) > 18 {
		return 0, errors.New("not 1 to 18 decimal digits")
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not 1 to 18 decimal digits")
		}
	}
	return strconv.ParseInt(s, 10, 64)
}
