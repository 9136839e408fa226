package idemcheck

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// decode reads a JSON document with its numbers as written.
func decode(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), string(b))
	return v
}

func TestReorder(t *testing.T) {
	body := []byte(`{"a":1, "b":{"c":[1,2.0]},"\u00e9":"\u00e9"}`)
	out, ok := reorder(body)
	require.True(t, ok)
	require.Equal(t, `{"\u00e9":"\u00e9","b":{"c":[1,2.0]},"a":1}`, string(out),
		"members reversed, names and values byte for byte")
	out, ok = spaced(body)
	require.True(t, ok)
	require.Equal(t, "{\n    \"a\" :  1,\n    \"b\" :  {\"c\":[1,2.0]},\n    \"\\u00e9\" :  \"\\u00e9\"\n}\n", string(out),
		"members in order, whitespace added, names and values byte for byte")
	_, ok = spaced(out)
	require.False(t, ok, "a body spaced already cannot be spaced into other bytes")

	for _, body := range []string{`{"a":1}`, `[1,2]`, `{"a":1,"b":2} {}`, `{"a":1,"b":`, ``, `"x"`, `{"a":1,"a":2}`} {
		_, ok := reorder([]byte(body))
		require.False(t, ok, body)
		_, ok = spaced([]byte(body))
		require.False(t, ok, body)
	}
}

// FuzzReorder: whatever reorder and spaced accept, they turn into the same
// JSON value with other bytes, so the checker never sends a request that
// differs in value from the original.
func FuzzReorder(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":2}`, `{"customer_id":"cus_1","items":[{"q":2}],"metadata":{}}`, `{"x":"\u00e9","y":1e3,"z":null}`, `{"a":1}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, change := range []func([]byte) ([]byte, bool){reorder, spaced} {
			out, ok := change(body)
			if !ok {
				continue
			}
			require.True(t, json.Valid(out), string(out))
			require.True(t, reflect.DeepEqual(decode(t, body), decode(t, out)), "%s\n%s", body, out)
			require.NotEqual(t, string(body), string(out))
		}
	})
}

func TestCountAt(t *testing.T) {
	doc := []byte(`{"object":"list","data":[{"id":1},{"id":2}],"meta":{"a/b":{"~n":7}},"neg":-1,"frac":1.5}`)
	for pointer, want := range map[string]int{"/data": 2, "/meta/a~1b/~0n": 7, "/data/1/id": 2} {
		n, err := countAt(doc, pointer)
		require.NoError(t, err, pointer)
		require.Equal(t, want, n, pointer)
	}
	for _, pointer := range []string{"/object", "/missing", "data", "/neg", "/frac", "/data/9", "/data/x"} {
		_, err := countAt(doc, pointer)
		require.Error(t, err, pointer)
	}
	n, err := countAt([]byte(`3`), "")
	require.NoError(t, err)
	require.Equal(t, 3, n)
	_, err = countAt([]byte(`<html>`), "")
	require.Error(t, err)
}

// FuzzCountAt: any answer and pointer give a count of zero or more, or an
// error; never a panic.
func FuzzCountAt(f *testing.F) {
	f.Add([]byte(`{"data":[1,2]}`), "/data")
	f.Add([]byte(`{"a":{"b":3}}`), "/a/b")
	f.Add([]byte(`[[1]]`), "/0")
	f.Fuzz(func(t *testing.T, doc []byte, pointer string) {
		n, err := countAt(doc, pointer)
		if err == nil {
			require.GreaterOrEqual(t, n, 0)
		}
	})
}

func TestLooseVariants(t *testing.T) {
	body := `{"order":{"quantity":2,"tip":0},"items":[{"gift":1}],"express":true,"note":"1"}`
	var got []string
	for _, v := range looseVariants([]byte(body)) {
		got = append(got, v.what+" => "+string(v.body))
	}
	require.Equal(t, []string{
		`quantity 2 sent as "2" => {"order":{"quantity":"2","tip":0},"items":[{"gift":1}],"express":true,"note":"1"}`,
		`tip 0 sent as "" => {"order":{"quantity":2,"tip":""},"items":[{"gift":1}],"express":true,"note":"1"}`,
		`gift 1 sent as true => {"order":{"quantity":2,"tip":0},"items":[{"gift":true}],"express":true,"note":"1"}`,
	}, got, "one value changed each, every other byte kept, three at most")

	got = nil
	for _, v := range looseVariants([]byte(`[{"on": true}, false, {"list": ["a", 5]}]`)) {
		got = append(got, v.what+" => "+string(v.body))
	}
	require.Equal(t, []string{
		`list 5 sent as "5" => [{"on": true}, false, {"list": ["a", "5"]}]`,
		`on true sent as 1 => [{"on": 1}, false, {"list": ["a", 5]}]`,
		`false sent as 0 => [{"on": true}, 0, {"list": ["a", 5]}]`,
	}, got, "each named after the member it is or is inside")

	for _, body := range []string{`{"a":"2"}`, `{"a":null}`, `{"a":`, ``, `"x"`} {
		require.Empty(t, looseVariants([]byte(body)), body)
	}
}

// FuzzLooseVariants: every variant is JSON that differs in value from the
// body, so the checker never sends the original under the name of a
// variant, nor a body that is not JSON.
func FuzzLooseVariants(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[0,2.5e3,true]}`, `[false]`, `{"a":{"b":-0}}`, `1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		for _, v := range looseVariants(body) {
			require.True(t, json.Valid(v.body), "%s: %s", v.what, v.body)
			require.False(t, reflect.DeepEqual(decode(t, body), decode(t, v.body)), "%s: %s", v.what, v.body)
		}
	})
}

func TestBodyDiff(t *testing.T) {
	require.Equal(t, `in "created_at", "extra"`, bodyDiff([]byte(`{"id":"o1","created_at":"a"}`), []byte(`{"id":"o1","created_at":"b","extra":1}`)))
	require.Equal(t, "in its bytes only (the same members and values)", bodyDiff([]byte(`{"id":"o1"}`), []byte(`{ "id":"o1"}`)))
	require.Equal(t, "from byte 3 (5 bytes, first 4)", bodyDiff([]byte(`okay`), []byte(`oka y`)))
}
