package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Running is a Server listening on a real socket.
type Running struct {
	// URL is the base URL to give NewClient, e.g. "http://127.0.0.1:41234".
	URL string
	// Server is the provider behind URL, for tests that inspect its ledger.
	Server *Server
	// Transport reaches a provider StartInMemory serves; nil for one on a
	// socket.
	Transport http.RoundTripper

	http         *http.Server
	served       chan error // Serve's result
	unused       unusedConns
	shutdownOnce sync.Once
	shutdownErr  error
}

// StartInProcess serves a new Server for cfg on a free port of 127.0.0.1.
// The API uses it when PROVIDER_URL is empty, and tests use it to talk to
// the provider over real HTTP. ctx bounds only the start; call Shutdown to
// stop.
func StartInProcess(ctx context.Context, cfg Config) (*Running, error) {
	return Start(ctx, "127.0.0.1:0", cfg)
}

// Start serves a new Server for cfg on addr (host:port; port 0 picks a free
// one) until Shutdown. ctx bounds only the start.
func Start(ctx context.Context, addr string, cfg Config) (*Running, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("provider: listen on %s: %w", addr, err)
	}
	srv := New(cfg)
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       time.Minute,
		// No WriteTimeout: a lost response is held for up to
		// Config.LostResponseHold on purpose.
		ErrorLog: slog.NewLogLogger(srv.log.Handler(), slog.LevelWarn),
	}
	r := &Running{URL: "http://" + ln.Addr().String(), Server: srv, http: hs, served: make(chan error, 1)}
	hs.ConnState = r.unused.track
	go func() { r.served <- hs.Serve(ln) }()
	return r, nil
}

// Shutdown stops the provider: it closes the Server first, which releases
// held answers and stops webhooks, so the HTTP server then drains quickly;
// then it waits for in-flight requests until ctx is done. It is safe to call
// more than once and returns the first call's result.
func (r *Running) Shutdown(ctx context.Context) error {
	r.shutdownOnce.Do(func() {
		r.Server.Close()
		if r.http == nil {
			return // in memory: nothing listens
		}
		r.unused.closeAll()
		err := r.http.Shutdown(ctx)
		if serveErr := <-r.served; !errors.Is(serveErr, http.ErrServerClosed) {
			err = errors.Join(err, serveErr)
		}
		if err != nil {
			r.shutdownErr = fmt.Errorf("provider: shutdown: %w", err)
		}
	})
	return r.shutdownErr
}

// unusedConns tracks connections that have not sent a byte yet.
// http.Server.Shutdown waits up to 5 s for such a connection to send a
// request, and a client transport that dialled one connection more than it
// needed never will; closing them at shutdown loses nothing, since no
// request has begun on them.
type unusedConns struct {
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	shutting bool
}

func (u *unusedConns) track(c net.Conn, state http.ConnState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case state == http.StateNew && u.shutting:
		_ = c.Close()
	case state == http.StateNew:
		if u.conns == nil {
			u.conns = make(map[net.Conn]struct{})
		}
		u.conns[c] = struct{}{}
	default:
		delete(u.conns, c)
	}
}

func (u *unusedConns) closeAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.shutting = true
	for c := range u.conns {
		_ = c.Close()
	}
	clear(u.conns)
}
