package handlers_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/handlers"
)

// TestKeyHasherIsAKeyedHashPrefix: the log's key hash is the first 12 hex
// characters of HMAC-SHA256 under the secret, the same on every call (the
// hashes are reused between calls) and different under another secret.
func TestKeyHasherIsAKeyedHashPrefix(t *testing.T) {
	secret := []byte("a-log-secret-for-tests")
	hash := handlers.NewKeyHasher(secret)
	for _, key := range []string{"order-1042", "order-1043", "order-1042", ""} {
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(key))
		require.Equal(t, hex.EncodeToString(mac.Sum(nil))[:12], hash(key), key)
	}
	require.NotEqual(t, hash("order-1042"), handlers.NewKeyHasher([]byte("another secret"))("order-1042"))
}
