package seal_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency/seal"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, seal.KeySize) }

func newCipher(t *testing.T, active string, ids ...string) *seal.Cipher {
	t.Helper()
	keys := map[string][]byte{}
	for i, id := range ids {
		keys[id] = testKey(byte(i + 1))
	}
	c, err := seal.New(keys, active)
	require.NoError(t, err)
	return c
}

func TestNewRefusesBadKeys(t *testing.T) {
	cases := map[string]struct {
		keys   map[string][]byte
		active string
		want   string
	}{
		"active not among keys": {map[string][]byte{"k1": testKey(1)}, "k2", `active key id "k2"`},
		"short key":             {map[string][]byte{"k1": testKey(1)[:16]}, "k1", "16 bytes, want 32"},
		"bad id":                {map[string][]byte{"k 1": testKey(1)}, "k 1", "may hold only"},
		"empty id":              {map[string][]byte{"": testKey(1)}, "", "1 to 32 characters"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := seal.New(tc.keys, tc.active)
			require.ErrorContains(t, err, tc.want)
		})
	}
	c := newCipher(t, "b", "b", "a")
	require.Equal(t, "b", c.ActiveKeyID())
	require.Equal(t, []string{"a", "b"}, c.KeyIDs())
}
