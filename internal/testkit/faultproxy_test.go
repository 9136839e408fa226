package testkit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/testkit"
)

// TestFaultProxy: a held request reaches the upstream only once released,
// even when its sender gave up meanwhile; a refused one never reaches it;
// the rest pass through.
func TestFaultProxy(t *testing.T) {
	var charges, lookups atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if testkit.Charge(r, nil) {
			charges.Add(1)
		} else {
			lookups.Add(1)
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(upstream.Close)
	p := &testkit.FaultProxy{Upstream: upstream.URL}
	url, err := p.Start()
	require.NoError(t, err)
	t.Cleanup(p.Close)

	send := func(ctx context.Context, method, path string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(`{"reference":"pay_1"}`))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}

	held := make(chan struct{}, 1)
	p.HoldWhere(testkit.Charge, func() { held <- struct{}{} })
	ctx, giveUp := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := send(ctx, http.MethodPost, "/v1/charges")
		gaveUp <- err
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the charge was not held")
	}
	require.Equal(t, 1, p.Held())
	status, err := send(context.Background(), http.MethodGet, "/v1/charges?reference=pay_1")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "a lookup passes while a charge is held")
	require.EqualValues(t, 0, charges.Load(), "held: not at the upstream yet")

	giveUp()
	require.Error(t, <-gaveUp, "the sender gave up")
	require.NoError(t, p.Release(context.Background()))
	require.EqualValues(t, 1, charges.Load(), "released: it lands all the same")
	require.Equal(t, 0, p.Held())

	p.RefuseWhere(testkit.Charge)
	status, err = send(context.Background(), http.MethodPost, "/v1/charges")
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.EqualValues(t, 1, charges.Load(), "refused: never at the upstream")

	p.RefuseWhere(nil)
	status, err = send(context.Background(), http.MethodPost, "/v1/charges")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.EqualValues(t, 2, charges.Load())
	require.EqualValues(t, 1, lookups.Load())
}
