package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDigestHashesPrefixedPartsThenBody: the bytes hashed are the parts,
// each as "<len>:" and itself, then the body; fingerprints stored by
// earlier versions are such digests, so these bytes never change.
func TestDigestHashesPrefixedPartsThenBody(t *testing.T) {
	require.Equal(t, sha256.Sum256([]byte("4:POST10:/v1/orders{}")), Digest([]byte(`{}`), "POST", "/v1/orders"))
	sum := Digest([]byte(`{}`), "POST", "/v1/orders")
	require.Equal(t, "3adbb9e13991dffe2d42e34acadb0b3f44487de0d2a8f8ab8bdd7d75707652e9", hex.EncodeToString(sum[:]))
	require.Equal(t, sha256.Sum256(nil), Digest(nil), "no parts, no body")
	require.Equal(t, sha256.Sum256([]byte("0:body")), Digest([]byte("body"), ""), "an empty part is still prefixed")
	long := string(make([]byte, 1234))
	require.Equal(t, sha256.Sum256([]byte("1234:"+long)), Digest(nil, long))
}

func TestDigestSplitsHashDifferently(t *testing.T) {
	sums := map[[sha256.Size]byte]string{}
	for name, sum := range map[string][sha256.Size]byte{
		"ab|c":         Digest(nil, "ab", "c"),
		"a|bc":         Digest(nil, "a", "bc"),
		"abc":          Digest(nil, "abc"),
		"abc|":         Digest(nil, "abc", ""),
		"|abc":         Digest(nil, "", "abc"),
		"ab + body c":  Digest([]byte("c"), "ab"),
		"a + body bc":  Digest([]byte("bc"), "a"),
		"body abc":     Digest([]byte("abc")),
		"ab|c + body":  Digest([]byte("x"), "ab", "c"),
		"a|bc + body":  Digest([]byte("x"), "a", "bc"),
		"a|b|c + body": Digest([]byte("x"), "a", "b", "c"),
	} {
		require.NotContains(t, sums, sum, "%s hashes as %s", name, sums[sum])
		sums[sum] = name
	}
}

// BenchmarkDigest shows what a request's digest costs: its hash and
// buffers come from a pool, so it allocates nothing once warm (the race
// detector empties pools at random, so a test could not hold this).
func BenchmarkDigest(b *testing.B) {
	body := []byte(`{"amount":1000,"currency":"EUR"}`)
	b.ReportAllocs()
	for b.Loop() {
		Digest(body, "POST", "/v1/orders/:id/payments", "id", "ord_1")
	}
}
