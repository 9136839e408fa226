package canon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"
)

// jcsToday is what computed every fingerprint stored before the move to an
// O(n log n) canonicalizer: gowebpki/jcs on the trimmed body, after the same
// UTF-8 and depth checks. It stays as the reference of the differential
// tests below, never on the request path.
func jcsToday(body []byte) ([]byte, bool) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return []byte("{}"), true
	}
	out, err := jcs.Transform(trimmed)
	return out, err == nil
}

// unlimited lifts the caps on members and strings, to compare outputs on
// bodies they refuse. The depth cap stays: the old path checked it before
// the library too, whose time grows with the square of the depth.
var unlimited = Limits{MaxMembers: -1, MaxString: -1}

// TestCanonicalizeMatchesTheLibraryItReplaced: byte for byte on the vectors
// where serializations are most likely to differ (number forms, escapes,
// UTF-16 key order), so that stored fingerprints keep matching.
func TestCanonicalizeMatchesTheLibraryItReplaced(t *testing.T) {
	vectors := []string{
		`{"n":[1e21,1e20,-0,0.0,2.0,2e0,5e-324,1.7976931348623157e308,9007199254740993,0.1,1e-7,1e-6,123456789012345678901234567890]}`,
		`{"n":[1E+2,-1.5e-10,100e-2,0.000001,1.0000000000000002,4.35,1e23,-1e-400]}`,
		`{"s":["\u00e9","é","\u20ac","\ud83d\ude00","😀","\t\n\r\b\f","\u0000\u001f\u007f","\/","\"\\"]}`,
		`{"\u20ac":1,"\r":2,"1":3,"\ud83d\ude00":4,"\u0080":5,"a":6,"aa":7,"b":8,"\ufb33":9,"\ud800\udc00":10}`,
		`{"peach":1,"péché":2,"pêche":3,"sin":4,"\u00e9":5,"e\u0301":6}`,
		`[null,true,false,{},[],"",0]`,
		`  {"b":{"d":1,"c":[{"z":1,"y":2}]},"a":null}  `,
		`"top-level string"`, `123`, `-0.0`, `null`,
		`{"pair":"\udbff\udfff"}`,
	}
	for _, v := range vectors {
		want, ok := jcsToday([]byte(v))
		require.True(t, ok, v)
		got, err := Canonicalize([]byte(v))
		require.NoError(t, err, v)
		require.Equal(t, string(want), string(got), v)
	}
}

// FuzzCanonicalizeDifferential: wherever the old library produced a
// canonical form, the new one produces the same bytes (caps lifted); where
// it refused, the new one refuses too.
func FuzzCanonicalizeDifferential(f *testing.F) {
	for _, seed := range []string{`{}`, `{"b":1,"a":[1,2.0,2e0,"\u00e9"]}`, `{"a":1,"a":2}`, `{"n":1e400}`, `{"n":-1e-400}`,
		`{"\u20ac":1,"\r":2,"\ud83d\ude00":4}`, `{"x":"\ud800"}`, `[1e21,5e-324,9007199254740993]`, ` "s" `} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := unlimited.Canonicalize(context.Background(), body)
		if err != nil && strings.Contains(err.Error(), "levels deep") {
			return // refused before any library, then and now
		}
		want, ok := jcsToday(body)
		if err != nil {
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Fatalf("error %v is not a refusal (*Error)", err)
			}
			if ok && validForUs(body) {
				t.Fatalf("refused %q, which jcs canonicalized to %q: %v", body, want, err)
			}
			return
		}
		if !ok {
			t.Fatalf("canonicalized %q to %q, which jcs refused", body, got)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("differs from jcs on %q:\n got %q\nwant %q", body, got, want)
		}
	})
}

// validForUs: the checks that come before canonicalizing and that jcs did
// not make (they were made before it, as here): UTF-8 only.
func validForUs(body []byte) bool {
	_, err := unlimited.Canonicalize(context.Background(), bytes.ToValidUTF8(body, nil))
	return err == nil && bytes.Equal(body, bytes.ToValidUTF8(body, nil))
}

func wideObject(n int, shuffle bool) []byte {
	keys := make([]int, n)
	for i := range keys {
		keys[i] = i
	}
	if shuffle {
		rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	}
	var sb strings.Builder
	sb.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"k%06d":0`, k)
	}
	sb.WriteByte('}')
	return []byte(sb.String())
}

// TestCanonicalizeCaps: the default caps refuse a body of 80,000 members, a
// long string and a double out of range at once, naming the rule.
func TestCanonicalizeCaps(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"members", string(wideObject(DefaultMaxMembers+1, false)), "more than 10000 object members"},
		{"string", `{"a":"` + strings.Repeat("x", DefaultMaxString+1) + `"}`, "longer than 65536 bytes"},
		{"number", `{"a":1e400}`, "outside the range of a double"},
		{"negative number", `{"a":[-1e309]}`, "outside the range of a double"},
		{"duplicate", `{"a":1,"a":2}`, "repeats a member name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Canonicalize([]byte(tc.body))
			require.ErrorAs(t, err, new(*Error))
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := Canonicalize(wideObject(DefaultMaxMembers, true))
	require.NoError(t, err, "at the cap")
	_, err = Canonicalize([]byte(`{"a":"` + strings.Repeat(`\"`, DefaultMaxString/2) + `"}`))
	require.NoError(t, err, "escapes count as sent")
}

// TestCanonicalizeStopsWhenTheClientGoes: a cancelled context ends the
// work with its error, not a canonical form.
func TestCanonicalizeStopsWhenTheClientGoes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := unlimited.Canonicalize(ctx, wideObject(80_000, true))
	require.ErrorIs(t, err, context.Canceled)
}

// BenchmarkCanonicalizeWide is the body that held a core for 182 s with the
// old library: 80,000 members in 1 MiB, shuffled, caps lifted; and the same
// refused at once under the default caps.
func BenchmarkCanonicalizeWide(b *testing.B) {
	body := wideObject(80_000, true)
	b.Run("caps_lifted", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := unlimited.Canonicalize(context.Background(), body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("default_caps", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := Canonicalize(body); err == nil {
				b.Fatal("accepted")
			}
		}
	})
}

// TestCanonicalizeWideMatches: a wide shuffled object comes out as the old
// library made it (5,000 members, where the old one still ends quickly),
// and a lone surrogate is refused by both.
func TestCanonicalizeWideMatches(t *testing.T) {
	body := wideObject(5_000, true)
	want, ok := jcsToday(body)
	require.True(t, ok)
	got, err := unlimited.Canonicalize(context.Background(), body)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))

	_, ok = jcsToday([]byte(`{"x":"\ud800"}`))
	require.False(t, ok)
	_, err = Canonicalize([]byte(`{"x":"\ud800"}`))
	require.ErrorAs(t, err, new(*Error))
}
