package idempotency

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strconv"
)

// The id of a resource with an outside call, and the key the outside
// service gets for it, are derived from the client's operation instead of
// drawn at random:
//
//	id = prefix + base32(HMAC-SHA256(secret, scope, client key, kind, n))[:26]
//
// each part length-prefixed, n the number of calls of that kind that
// survive under (scope, client key). A retry after a failover lost the
// resource and its record computes the same n, id and key, so the outside
// service sees the request it already executed and answers it again rather
// than executing it twice. A key legitimately reused after its TTL
// (tombstones off) finds the earlier call, n is 1, and it gets a new id and
// key: never the earlier call's outcome. A derived key deduplicates only
// for as long as the outside service keeps keys (24 hours at Stripe).
//
// The secret is the same on every instance. Each call records which secret
// derived it (KeyFingerprint, never the secret), so that a changed secret is
// noticed before it derives anything: an instance whose secret differs from
// the recent calls' must be told the old one too (Config.PreviousKeySecrets),
// and a new operation then asks the outside service whether the old
// secret's key of the same operation holds a call already (its rows lost
// in a failover, its client retrying) before it derives with the new one.

// startedN stands for n in the id of a call the system starts itself
// (Effect.Start), whose seed takes the client key's place: no client's
// call is ever numbered so.
const startedN = -1

// keyVersion names this scheme in Call.KeyVersion; 0 is the ids drawn at
// random before it.
const keyVersion = 1

// DevelopmentKeySecret derives keys when Config.KeySecret is empty: fine
// for development and tests, where nobody else derives them; it is public,
// so production sets its own (the application refuses to start without
// one, or with this one).
const DevelopmentKeySecret = "idempotency-development-key-secret"

var developmentKeySecret = []byte(DevelopmentKeySecret)

// crockford is the base32 alphabet of ULIDs, so derived ids look like the
// random ones before them (pay_01J…).
var crockford = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

// KeyFingerprint names secret without revealing it: the first 16 hex
// characters of an HMAC of a fixed text under it. Calls store it, and an
// instance compares it with its own before it derives any key.
func KeyFingerprint(secret []byte) string {
	if len(secret) == 0 {
		secret = developmentKeySecret
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("idempotency key secret fingerprint"))
	return hex.EncodeToString(mac.Sum(nil))[:16]
}

// deriveID is the id of the n-th call of kind under the client's key.
func deriveID(secret []byte, prefix, scope, clientKey, kind string, n int) string {
	mac := hmac.New(sha256.New, secret)
	var num [20]byte
	for _, part := range []string{scope, clientKey, kind, strconv.Itoa(n)} {
		mac.Write(strconv.AppendInt(num[:0], int64(len(part)), 10))
		mac.Write([]byte{':'})
		mac.Write([]byte(part))
	}
	return prefix + crockford.EncodeToString(mac.Sum(nil))[:26]
}
