package sendhttp_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/sendhttp"
)

// TestDoSortsOutcomes: each way an outside call can end is sorted as
// the core needs it, and the server's count of requests shows which ones
// can have had an effect.
func TestDoSortsOutcomes(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte(`{"id":"msg_1"}`))
		case "/refused":
			w.WriteHeader(http.StatusUnprocessableEntity)
		case "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/broken":
			w.WriteHeader(http.StatusBadGateway)
		case "/cut":
			// The request arrived (it may have had its effect), then the
			// connection dies before any answer.
			conn, _, err := w.(http.Hijacker).Hijack()
			require.NoError(t, err)
			_ = conn.Close()
		}
	}))
	defer srv.Close()
	send := func(url string, key bool) (int, []byte, error) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
		require.NoError(t, err)
		if key {
			req.Header.Set(idempotency.HeaderKey, "call-1")
		}
		return sendhttp.Do(srv.Client(), req, 1<<20)
	}

	status, body, err := send(srv.URL+"/ok", true)
	require.NoError(t, err)
	require.Equal(t, 200, status)
	require.JSONEq(t, `{"id":"msg_1"}`, string(body))

	status, _, err = send(srv.URL+"/refused", true)
	require.NoError(t, err, "a 4xx is a definitive answer")
	require.Equal(t, 422, status)

	_, _, err = send(srv.URL+"/busy", true)
	require.ErrorIs(t, err, idempotency.ErrNotExecuted)

	unknown := func(err error) bool { return err != nil && !errors.Is(err, idempotency.ErrNotExecuted) }
	_, _, err = send(srv.URL+"/broken", true)
	require.True(t, unknown(err), "another 5xx: unknown (%v)", err)

	before := hits.Load()
	_, _, err = send(srv.URL+"/cut", true)
	require.True(t, unknown(err), "sent, then no answer: unknown (%v)", err)
	require.Greater(t, hits.Load(), before)

	before = hits.Load()
	_, _, err = send(srv.URL+"/ok", false)
	require.ErrorIs(t, err, idempotency.ErrNotExecuted, "no key: refused before sending")
	require.Equal(t, before, hits.Load())

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	req, err := http.NewRequest(http.MethodPost, closed.URL+"/ok", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set(idempotency.HeaderKey, "call-2")
	_, _, err = sendhttp.Do(nil, req, 1<<20)
	require.ErrorIs(t, err, idempotency.ErrNotExecuted, "never connected: nothing was sent")
}
