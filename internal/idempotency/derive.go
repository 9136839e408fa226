package idempotency

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strconv"
)

// The id of a resource with an outside call, and the key the outside
// service gets for it, are derived from the client's operation, not drawn
// at random:
//
//	id = prefix + base32(HMAC-SHA256(secret, scope, client key, kind, n))[:26]
//
// each part length-prefixed, n the number of calls of that kind under the
// key's earlier records. A retry after a failover lost our rows computes
// the same id and key, so the outside service answers what it already did
// instead of doing it twice; a key reused after its TTL gets n = 1, a new
// key. Each call records which secret derived it (KeyFingerprint), so a
// changed secret is noticed; the old one, kept in PreviousKeySecrets, is
// asked about first (Effect.secret).

// startedN is n for a call the system starts itself (Effect.Start).
const startedN = -1

// keyVersion names this scheme in Call.KeyVersion; 0 is the ids drawn at
// random before it.
const keyVersion = 1

// DevelopmentKeySecret derives keys when Config.KeySecret is empty: public,
// so for development and tests only (the application refuses it in
// production).
const DevelopmentKeySecret = "idempotency-development-key-secret"

var developmentKeySecret = []byte(DevelopmentKeySecret)

// crockford is the base32 alphabet of ULIDs, so derived ids look like the
// random ones before them (pay_01J…).
var crockford = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

// KeyFingerprint names secret without revealing it: 16 hex characters of
// an HMAC of a fixed text under it.
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
