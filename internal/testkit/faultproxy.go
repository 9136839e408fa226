package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// FaultProxy stands between one API instance and a service it calls (the
// mock provider), and does to the requests a test picks what a network, a
// frozen process or an outage would: it holds them until Release, or answers
// them 503 without passing them on. Everything else passes through. One
// proxy per instance tells the test which instance sent a request.
//
// A held request is passed on once released whether its sender still waits
// or not (it was frozen, killed, or gave up): the call lands late, as the
// call of a process frozen before it sent it does once the process thaws.
// That is the point of the proxy: the sender has recorded its intent, and
// its call reaches the service after others acted on the key.
//
// The tests of internal/app and the chaos harness (tools/chaos) use it, so
// it takes no testing.TB: start it with Start and end it with Close.
type FaultProxy struct {
	// Upstream is the service's base URL.
	Upstream string

	mu     sync.Mutex
	hold   func(r *http.Request, body []byte) bool
	refuse func(r *http.Request, body []byte) bool
	onHold func()
	held   []*heldRequest
	gone   chan struct{} // closed by Close: held requests are dropped
	srv    *http.Server
	url    string
	client *http.Client
}

// heldRequest is one request held until Release.
type heldRequest struct {
	release chan struct{} // closed by Release
	done    chan error    // the upstream's answer arrived (nil) or not
}

// Start serves the proxy on a free loopback port and returns its base URL.
func (p *FaultProxy) Start() (string, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p.gone = make(chan struct{})
	p.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	p.url = "http://" + ln.Addr().String()
	go func() { _ = p.srv.Serve(ln) }()
	return p.url, nil
}

// URL is the base URL Start returned.
func (p *FaultProxy) URL() string { return p.url }

// Close stops the proxy; requests still held are dropped, never passed on.
func (p *FaultProxy) Close() {
	p.mu.Lock()
	select {
	case <-p.gone:
	default:
		close(p.gone)
	}
	p.mu.Unlock()
	if p.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.srv.Shutdown(ctx)
	}
}

// HoldWhere holds, from now on, every request for which pick is true, until
// Release; onHold, if not nil, runs as each is held (before the request goes
// anywhere: it may freeze the sender). A nil pick holds nothing more.
func (p *FaultProxy) HoldWhere(pick func(r *http.Request, body []byte) bool, onHold func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold, p.onHold = pick, onHold
}

// RefuseWhere answers, from now on, every request for which pick is true
// with 503 and a problem body, before any effect, as a service in an outage
// does. A nil pick refuses nothing more.
func (p *FaultProxy) RefuseWhere(pick func(r *http.Request, body []byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = pick
}

// Held is how many requests are held now.
func (p *FaultProxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// Release stops holding new requests, passes on every request held so far,
// and returns once the service has answered each of them (or ctx ends). The
// answer goes back to the sender if it still listens.
func (p *FaultProxy) Release(ctx context.Context) error {
	p.mu.Lock()
	held := p.held
	p.held, p.hold, p.onHold = nil, nil, nil
	p.mu.Unlock()
	for _, h := range held {
		close(h.release)
	}
	var errs []error
	for _, h := range held {
		select {
		case err := <-h.done:
			errs = append(errs, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// Charge picks the provider's charge requests (POST /v1/charges).
func Charge(r *http.Request, _ []byte) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/v1/charges"
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the sender went away before it sent the whole request
	}
	p.mu.Lock()
	refuse := p.refuse != nil && p.refuse(r, body)
	var h *heldRequest
	var onHold func()
	if !refuse && p.hold != nil && p.hold(r, body) {
		h = &heldRequest{release: make(chan struct{}), done: make(chan error, 1)}
		p.held = append(p.held, h)
		onHold = p.onHold
	}
	gone := p.gone
	p.mu.Unlock()

	switch {
	case refuse:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"type":"about:blank","title":"Service Unavailable","status":503,"code":"unavailable",`+
			`"detail":"refused by the test's fault proxy before any effect"}`)
		return
	case h != nil:
		if onHold != nil {
			onHold()
		}
		select {
		case <-h.release:
		case <-gone:
			h.done <- errors.New("the proxy closed while the request was held")
			return
		}
	}
	// Detached from the sender: a held request lands even if the sender
	// has given up on it meanwhile.
	resp, err := p.forward(context.WithoutCancel(r.Context()), r, body)
	if h != nil {
		h.done <- err
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for name, values := range resp.Header {
		w.Header()[name] = values
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// forward sends r, with body, to the upstream service.
func (p *FaultProxy) forward(ctx context.Context, r *http.Request, body []byte) (*http.Response, error) {
	out, err := http.NewRequestWithContext(ctx, r.Method, p.Upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out.Header = r.Header.Clone()
	resp, err := p.client.Do(out)
	if err != nil {
		return nil, fmt.Errorf("fault proxy: %s %s: %w", r.Method, r.URL.Path, err)
	}
	return resp, nil
}
