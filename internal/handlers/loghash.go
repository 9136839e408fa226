package handlers

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// keyHashLength is how many hex characters of the HMAC a log line keeps:
// 48 bits, plenty to tell the keys of one merchant apart when reading logs,
// and far too few to stand in for the key anywhere.
const keyHashLength = 12

// NewKeyHasher returns the function that turns an Idempotency-Key into what
// logs may carry instead: the first 12 hex characters of its HMAC-SHA256
// under secret. The hash is keyed so that whoever reads the logs cannot
// confirm a guess (keys such as "order-1042" are easy to guess). With the
// same secret (LOG_KEY_SECRET) every instance writes the same hash for a
// key, so one operation can be followed across instances and restarts; an
// empty secret picks a random one for this process only.
func NewKeyHasher(secret []byte) func(key string) string {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret) // never fails; see crypto/rand.Read
	}
	secret = append([]byte(nil), secret...)
	// A keyed hash and its buffers are reset and used again rather than
	// made per request.
	type keyedHash struct {
		mac     hash.Hash
		in, sum []byte
	}
	macs := sync.Pool{New: func() any { return &keyedHash{mac: hmac.New(sha256.New, secret)} }}
	return func(key string) string {
		h := macs.Get().(*keyedHash)
		h.mac.Reset()
		h.in = append(h.in[:0], key...)
		h.mac.Write(h.in)
		h.sum = h.mac.Sum(h.sum[:0])
		var text [keyHashLength]byte
		hex.Encode(text[:], h.sum[:keyHashLength/2])
		macs.Put(h)
		return string(text[:])
	}
}
