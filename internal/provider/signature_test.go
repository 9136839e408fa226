package provider_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/provider"
)

var signedAt = time.Unix(1_700_000_000, 0)

func TestSign(t *testing.T) {
	body := []byte(`{"id":"evt_1"}`)
	mac := hmac.New(sha256.New, []byte("whsec_test"))
	mac.Write([]byte("1700000000." + string(body)))

	require.Equal(t, "t=1700000000,v1="+hex.EncodeToString(mac.Sum(nil)), provider.Sign("whsec_test", signedAt, body))
}

func TestVerifySignature(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"charge.succeeded"}`)
	valid := provider.Sign("whsec_test", signedAt, body)
	_, validMAC, _ := strings.Cut(valid, ",v1=")
	otherMAC := strings.Repeat("ab", 32)

	tests := []struct {
		name      string
		secret    string
		header    string
		body      []byte
		now       time.Time
		tolerance time.Duration
		want      error // nil: accepted
	}{
		{"valid", "whsec_test", valid, body, signedAt, 0, nil},
		{"valid, spaces after commas", "whsec_test", "t=1700000000, v1=" + validMAC, body, signedAt, 0, nil},
		{"valid, v1 first", "whsec_test", "v1=" + validMAC + ",t=1700000000", body, signedAt, 0, nil},
		{"valid among rotated signatures", "whsec_test", "t=1700000000,v1=" + otherMAC + ",v1=" + validMAC, body, signedAt, 0, nil},
		{"unknown scheme ignored", "whsec_test", valid + ",v0=whatever", body, signedAt, 0, nil},
		{"4m59s old", "whsec_test", valid, body, signedAt.Add(4*time.Minute + 59*time.Second), 0, nil},
		{"exactly 5m old", "whsec_test", valid, body, signedAt.Add(5 * time.Minute), 0, nil},
		{"5m1s old", "whsec_test", valid, body, signedAt.Add(5*time.Minute + time.Second), 0, provider.ErrSignatureExpired},
		{"an hour old", "whsec_test", valid, body, signedAt.Add(time.Hour), 0, provider.ErrSignatureExpired},
		{"5m1s in the future", "whsec_test", valid, body, signedAt.Add(-5*time.Minute - time.Second), 0, provider.ErrSignatureExpired},
		{"within a custom tolerance", "whsec_test", valid, body, signedAt.Add(time.Hour), 2 * time.Hour, nil},
		{"outside a custom tolerance", "whsec_test", valid, body, signedAt.Add(2 * time.Second), time.Second, provider.ErrSignatureExpired},
		{"wrong secret", "whsec_other", valid, body, signedAt, 0, provider.ErrSignatureMismatch},
		{"tampered body", "whsec_test", valid, []byte(`{"id":"evt_2","type":"charge.succeeded"}`), signedAt, 0, provider.ErrSignatureMismatch},
		{"tampered timestamp", "whsec_test", "t=1700000001,v1=" + validMAC, body, signedAt, 0, provider.ErrSignatureMismatch},
		{"stale and forged", "whsec_test", "t=1,v1=" + otherMAC, body, signedAt, 0, provider.ErrSignatureMismatch},
		{"missing", "whsec_test", "", body, signedAt, 0, provider.ErrSignatureMissing},
		{"no v1", "whsec_test", "t=1700000000", body, signedAt, 0, provider.ErrSignatureMalformed},
		{"no t", "whsec_test", "v1=" + validMAC, body, signedAt, 0, provider.ErrSignatureMalformed},
		{"two t", "whsec_test", "t=1700000000,t=1700000000,v1=" + validMAC, body, signedAt, 0, provider.ErrSignatureMalformed},
		{"signed t", "whsec_test", "t=+1700000000,v1=" + validMAC, body, signedAt, 0, provider.ErrSignatureMalformed},
		{"negative t", "whsec_test", "t=-1,v1=" + validMAC, body, signedAt, 0, provider.ErrSignatureMalformed},
		{"huge t", "whsec_test", "t=99999999999999999999,v1=" + validMAC, body, signedAt, 0, provider.ErrSignatureMalformed},
		{"v1 in upper-case hex", "whsec_test", "t=1700000000,v1=" + strings.ToUpper(validMAC), body, signedAt, 0, nil},
		{"v1 not hex", "whsec_test", "t=1700000000,v1=zz", body, signedAt, 0, provider.ErrSignatureMalformed},
		{"v1 too short", "whsec_test", "t=1700000000,v1=abcd", body, signedAt, 0, provider.ErrSignatureMalformed},
		{"no equals sign", "whsec_test", "t1700000000", body, signedAt, 0, provider.ErrSignatureMalformed},
		{"too long", "whsec_test", valid + strings.Repeat(",x=y", 300), body, signedAt, 0, provider.ErrSignatureMalformed},
		{"no secret configured", "", valid, body, signedAt, 0, provider.ErrInvalidSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := provider.VerifySignature(tt.secret, tt.header, tt.body, tt.now, tt.tolerance)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			require.ErrorIs(t, err, provider.ErrInvalidSignature, "every refusal is an ErrInvalidSignature")
		})
	}
}

// FuzzVerifySignature feeds arbitrary headers and bodies to the parser. It
// must never panic, must refuse only with ErrInvalidSignature, and must
// never accept a header for a body it was not made for. The seed corpus is
// in testdata/fuzz/FuzzVerifySignature.
func FuzzVerifySignature(f *testing.F) {
	f.Add(provider.Sign("whsec_test", signedAt, []byte(`{}`)), []byte(`{}`))
	f.Add("t=1700000000,v1=", []byte(nil))

	f.Fuzz(func(t *testing.T, header string, body []byte) {
		err := provider.VerifySignature("whsec_test", header, body, signedAt, 0)
		if err != nil {
			require.ErrorIs(t, err, provider.ErrInvalidSignature)
		} else {
			// Accepted: the header must carry the MAC of this very body,
			// signed at its own t.
			var ts string
			for part := range strings.SplitSeq(header, ",") {
				if name, value, _ := strings.Cut(strings.TrimSpace(part), "="); name == "t" {
					ts = value
				}
			}
			unix, convErr := strconv.ParseInt(ts, 10, 64)
			require.NoError(t, convErr)
			_, mac, _ := strings.Cut(provider.Sign("whsec_test", time.Unix(unix, 0), body), "v1=")
			require.Contains(t, strings.ToLower(header), mac, "hex digits may come in either case")
			require.Error(t, provider.VerifySignature("whsec_test", header, append(body, '!'), signedAt, 0),
				"the same header must not fit another body")
		}

		// And whatever the body, a fresh signature of it verifies.
		require.NoError(t, provider.VerifySignature("whsec_test", provider.Sign("whsec_test", signedAt, body), body, signedAt, 0))
	})
}
