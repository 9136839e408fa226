package outside_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/testkit/outside"
)

func post(t *testing.T, ctx context.Context, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/labels", strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out), string(data))
	return resp.StatusCode, out
}

func get(t *testing.T, url, key string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url + "/v1/labels?idempotency_key=" + key)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func TestOneEffectPerKey(t *testing.T) {
	s := &outside.Service{Prefix: "lbl_"}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx := context.Background()

	status, first := post(t, ctx, srv.URL, "k1", `{"to":"Oslo","weight":2}`)
	require.Equal(t, 201, status)
	require.Equal(t, map[string]any{"id": "lbl_1", "key": "k1", "to": "Oslo", "weight": 2.0}, first)
	status, again := post(t, ctx, srv.URL, "k1", `{"weight":2, "to":"Oslo"}`)
	require.Equal(t, 201, status, "the same object, however written, is a copy")
	require.Equal(t, first, again)
	status, other := post(t, ctx, srv.URL, "k2", `{"to":"Oslo","weight":2}`)
	require.Equal(t, 201, status)
	require.Equal(t, "lbl_2", other["id"])

	status, reused := post(t, ctx, srv.URL, "k1", `{"to":"Bergen","weight":2}`)
	require.Equal(t, 422, status)
	require.Contains(t, reused["error"], "another request")
	require.Equal(t, 2, s.Effects())
	require.Equal(t, 4, s.Posts())

	status, found := get(t, srv.URL, "k1")
	require.Equal(t, 200, status)
	require.Equal(t, first, found)
	status, _ = get(t, srv.URL, "k9")
	require.Equal(t, 404, status)
}

func TestBadRequestsDoNothing(t *testing.T) {
	s := &outside.Service{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, c := range []struct{ key, body string }{{"", `{"to":"Oslo"}`}, {"k", `[1]`}, {"k", `null`}, {"k", `{"to":`}} {
		status, out := post(t, context.Background(), srv.URL, c.key, c.body)
		require.Equal(t, 400, status, c)
		require.NotEmpty(t, out["error"])
	}
	require.Zero(t, s.Effects())
}

func TestUnavailableBeforeAnyEffect(t *testing.T) {
	s := &outside.Service{Unavailable: 2}
	srv := httptest.NewServer(s)
	defer srv.Close()
	for range 2 {
		status, _ := post(t, context.Background(), srv.URL, "k1", `{"to":"Oslo"}`)
		require.Equal(t, 503, status)
	}
	require.Zero(t, s.Effects(), "a 503 does nothing")
	status, out := post(t, context.Background(), srv.URL, "k1", `{"to":"Oslo"}`)
	require.Equal(t, 201, status)
	require.Equal(t, "fx_1", out["id"])
	require.Equal(t, 1, s.Effects())
	require.Equal(t, 3, s.Posts())
}

func TestRefusalIsDefinitive(t *testing.T) {
	s := &outside.Service{Refuse: func(r map[string]any) string {
		if r["to"] == "Atlantis" {
			return "no such place"
		}
		return ""
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	for range 2 {
		status, out := post(t, context.Background(), srv.URL, "k1", `{"to":"Atlantis"}`)
		require.Equal(t, 422, status)
		require.Equal(t, "no such place", out["error"])
	}
	require.Zero(t, s.Effects())
	status, _ := get(t, srv.URL, "k1")
	require.Equal(t, 404, status, "nothing was done under the key")
}

// TestLostAnswer: the first answer under a key never arrives (the caller
// gives up), but the effect is made; a copy, or a GET, finds it.
func TestLostAnswer(t *testing.T) {
	s := &outside.Service{LoseFirst: time.Minute}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	status, _ := post(t, ctx, srv.URL, "k1", `{"to":"Oslo"}`)
	require.Zero(t, status, "no answer before the caller gave up")
	require.Equal(t, 1, s.Effects(), "the effect was made")

	status, found := get(t, srv.URL, "k1")
	require.Equal(t, 200, status)
	require.Equal(t, "fx_1", found["id"])
	status, again := post(t, context.Background(), srv.URL, "k1", `{"to":"Oslo"}`)
	require.Equal(t, 201, status, "only the first answer is lost")
	require.Equal(t, found, again)
	require.Equal(t, 1, s.Effects())
}
