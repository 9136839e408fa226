package gormstore

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
)

// FuzzDecodeHeaders reads the stored headers column: anything unreadable is
// errBadHeaders, and what encodeHeaders writes reads back as it was.
func FuzzDecodeHeaders(f *testing.F) {
	f.Add(`{"Content-Type":"application/json","Location":"/v1/orders/ord_1"}`, "application/json", `"1"`)
	f.Fuzz(func(t *testing.T, stored, contentType, etag string) {
		if _, err := decodeHeaders(stored); err != nil && !errors.Is(err, errBadHeaders) {
			t.Fatalf("error %v does not wrap errBadHeaders", err)
		}
		in := http.Header{}
		in.Set("Content-Type", contentType)
		in.Set("ETag", etag)
		out, err := decodeHeaders(encodeHeaders(in))
		if err != nil {
			t.Fatalf("own encoding does not decode: %v", err)
		}
		// Values a handler can send (valid field values, in UTF-8: the
		// column is JSON text) come back as they went.
		valid := func(v string) bool { return httpguts.ValidHeaderFieldValue(v) && utf8.ValidString(v) }
		if valid(contentType) && valid(etag) &&
			(out.Get("Content-Type") != contentType || out.Get("Etag") != etag) {
			t.Fatalf("round trip: %q %q -> %v", contentType, etag, out)
		}
	})
}

// TestEncodeHeadersAsBefore: the hand-written encoding reads back as the
// encoding/json one did, HTML characters and invalid UTF-8 included.
func TestEncodeHeadersAsBefore(t *testing.T) {
	in := http.Header{"Location": {"/v1/orders/ord_1?a=<b>&c"}, "Content-Type": {"application/json"}, "Etag": {"\"1\"\xff"}, "X-Empty": {}}
	got, err := decodeHeaders(encodeHeaders(in))
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{"Location": {"/v1/orders/ord_1?a=<b>&c"}, "Content-Type": {"application/json"}, "Etag": {"\"1\"\ufffd"}, "X-Empty": {""}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for name := range want {
		if got.Get(name) != want.Get(name) {
			t.Fatalf("%s: got %q, want %q", name, got.Get(name), want.Get(name))
		}
	}
	if enc := encodeHeaders(in); enc != encodeHeaders(in.Clone()) || enc[0] != '{' {
		t.Fatalf("not stable: %s", enc)
	}
}

// FuzzPlainHeaders: whatever decodePlainHeaders reads, it reads as
// encoding/json does.
func FuzzPlainHeaders(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"Content-Type":"application/json","Location":"/v1/orders/ord_1"}`,
		`{"content-type":"a","Etag":"\"1\""}`, `{"A":"1","a":"2"}`, `{"A":"1","A":"2"}`,
		`{"A":"1",}`, `{"A":"}"}`, `{"A" :"1"}`, `{"A":"x,y","B":""}`, `{"":"1"}`, `null`,
		`{"Etag":"\"1\""}`, `{"A":"\u00e9\/"}`, `{"A":"\ud800"}`, `{"A":"\ud83d\ude00"}`, `{"A":"\"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stored string) {
		got, ok := decodePlainHeaders(stored)
		if !ok {
			return
		}
		var flat map[string]string
		if err := json.Unmarshal([]byte(stored), &flat); err != nil {
			t.Fatalf("read %q, which encoding/json refuses: %v", stored, err)
		}
		want := http.Header{}
		for name, v := range flat {
			want.Set(name, v)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %v, encoding/json %v", stored, got, want)
		}
	})
}
