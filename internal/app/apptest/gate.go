package apptest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Gate is a proxy between the API and a provider that lets a test stop the
// world at the outside call, without a hook in the product: the first
// request Hold picks is held, before it reaches the provider or (After)
// once the provider has answered it, until Release. The test acts while it
// is held: it kills the API (a crash at that point), stops it (a pause), or
// lets another instance take over. Every other request passes through.
type Gate struct {
	// Upstream is the provider's base URL.
	Upstream string
	// Hold picks the request to hold; nil picks the first charge.
	Hold func(r *http.Request) bool
	// After holds the request once the provider has answered it (its
	// effect is done, the answer not yet delivered), instead of before.
	After bool

	picked    bool
	mu        sync.Mutex
	arrived   chan struct{}
	release   chan struct{}
	releaseMu sync.Once
}

// Start serves the gate on a free loopback port until the test ends, and
// returns its base URL: the API's PROVIDER_URL. A request still held then is
// released, so that nothing outlives the test.
func (g *Gate) Start(t testing.TB) string {
	t.Helper()
	up, err := url.Parse(g.Upstream)
	require.NoError(t, err)
	g.arrived, g.release = make(chan struct{}), make(chan struct{})
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.Transport = gateTransport{g: g}
	srv := httptest.NewServer(proxy)
	t.Cleanup(func() {
		g.Release()
		srv.Close()
	})
	return srv.URL
}

// Arrived is closed once the picked request is held.
func (g *Gate) Arrived() <-chan struct{} { return g.arrived }

// Release lets the held request go on (and every later one through).
func (g *Gate) Release() { g.releaseMu.Do(func() { close(g.release) }) }

// pick reports whether r is the one request to hold.
func (g *Gate) pick(r *http.Request) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.picked {
		return false
	}
	hold := g.Hold
	if hold == nil {
		hold = func(r *http.Request) bool { return r.Method == http.MethodPost && r.URL.Path == "/v1/charges" }
	}
	g.picked = hold(r)
	return g.picked
}

type gateTransport struct{ g *Gate }

func (t gateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	g := t.g
	if !g.pick(r) {
		return http.DefaultTransport.RoundTrip(r)
	}
	if !g.After {
		close(g.arrived)
		<-g.release
		return http.DefaultTransport.RoundTrip(r)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		// The provider's answer is read whole now: its effect is done,
		// and the caller gets it only after the release, if at all.
		body, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		err = rerr
	}
	close(g.arrived)
	<-g.release
	return resp, err
}
