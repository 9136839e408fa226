package handlers_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/handlers"
)

// guardedServer serves a small handler behind a ConnGuard with limits on
// 127.0.0.1; GET /hold answers only once the test ends.
func guardedServer(t *testing.T, limits handlers.ConnLimits) *guardedTestServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hold := make(chan struct{})
	gs := &guardedTestServer{addr: ln.Addr().String(), idles: map[string]int{}}
	guard := handlers.GuardListener(ln, limits)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				<-hold
			}
			w.WriteHeader(http.StatusNoContent)
		}),
		ConnState: func(c net.Conn, state http.ConnState) {
			guard.ConnState(c, state)
			if state == http.StateIdle {
				gs.mu.Lock()
				gs.idles[c.RemoteAddr().String()]++
				gs.mu.Unlock()
			}
		},
		ReadHeaderTimeout: time.Minute,
	}
	go func() { _ = srv.Serve(guard) }()
	t.Cleanup(func() {
		close(hold)
		_ = srv.Close()
	})
	return gs
}

// guardedTestServer counts, by client address, the times the server saw
// a connection go idle: a client reads its answer a moment before the
// server marks the connection idle, and the test waits for that mark
// before it counts on which connection is idle the longest.
type guardedTestServer struct {
	addr  string
	mu    sync.Mutex
	idles map[string]int
}

// waitIdle waits until the server has seen the connection from local go
// idle n times in all.
func (gs *guardedTestServer) waitIdle(t *testing.T, local string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		gs.mu.Lock()
		defer gs.mu.Unlock()
		return gs.idles[local] >= n
	}, 30*time.Second, time.Millisecond, "the server never saw %s go idle %d times", local, n)
}

// guardClient is one connection to a guarded server from a given
// loopback address.
type guardClient struct {
	conn   net.Conn
	r      *bufio.Reader
	server *guardedTestServer
	served int // answers read
}

func (gs *guardedTestServer) dial(t *testing.T, from net.IP) *guardClient {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 5 * time.Second}
	conn, err := d.DialContext(t.Context(), "tcp", gs.addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	// The deadline only stops a test that would hang: requireClosed tells
	// it from the server's close.
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	return &guardClient{conn: conn, r: bufio.NewReader(conn), server: gs}
}

// send writes a request for path on the connection, keeping it alive.
func (c *guardClient) send(t *testing.T, path string) {
	t.Helper()
	_, err := io.WriteString(c.conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
}

// get sends a request for path and reads its answer's status, then waits
// for the server to see the connection idle again.
func (c *guardClient) get(t *testing.T, path string) int {
	t.Helper()
	c.send(t, path)
	resp, err := http.ReadResponse(c.r, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		c.served++
		c.server.waitIdle(t, c.conn.LocalAddr().String(), c.served)
	}
	return resp.StatusCode
}

// requireClosed: the server closed the connection (and not the test's
// own deadline).
func (c *guardClient) requireClosed(t *testing.T) {
	t.Helper()
	_, err := c.r.ReadByte()
	require.Error(t, err)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the connection is still open")
}

var (
	clientA = net.IPv4(127, 0, 0, 1)
	clientB = net.IPv4(127, 0, 0, 2)
)

// TestConnGuardIdleYields: at the total, the connection idle the longest
// is closed to make room for a new client, while connections in use (a
// request running, or none read yet) are never closed; with none idle, a
// new connection is refused with 429 too_many_connections.
func TestConnGuardIdleYields(t *testing.T) {
	t.Run("the longest idle yields", func(t *testing.T) {
		srv := guardedServer(t, handlers.ConnLimits{PerClient: 4, Total: 4})
		first, second := srv.dial(t, clientA), srv.dial(t, clientA)
		require.Equal(t, 204, first.get(t, "/"))
		require.Equal(t, 204, second.get(t, "/"))
		// first is used again: second is now the one idle the longest.
		require.Equal(t, 204, first.get(t, "/"))
		fresh := srv.dial(t, clientA) // no request yet: not idle
		busy := srv.dial(t, clientA)
		busy.send(t, "/hold") // a request running: not idle

		newcomer := srv.dial(t, clientB)
		require.Equal(t, 204, newcomer.get(t, "/"), "a new client is served at the total")
		second.requireClosed(t)
		require.Equal(t, 204, first.get(t, "/"), "only the longest idle yields")

		// first was used after newcomer: newcomer yields next.
		late := srv.dial(t, clientB)
		require.Equal(t, 204, late.get(t, "/"))
		newcomer.requireClosed(t)
		require.Equal(t, 204, first.get(t, "/"))
		require.Equal(t, 204, fresh.get(t, "/"), "a connection not yet read from kept its place")
	})

	t.Run("with none idle, a new connection is refused", func(t *testing.T) {
		srv := guardedServer(t, handlers.ConnLimits{PerClient: 2, Total: 2})
		srv.dial(t, clientA)                  // no request yet
		srv.dial(t, clientA).send(t, "/hold") // a request running

		refused := srv.dial(t, clientB)
		refused.send(t, "/")
		resp, err := http.ReadResponse(refused.r, nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		require.Contains(t, string(body), `"code":"too_many_connections"`)
	})

	t.Run("past the client's own limit, its idle connections do not yield", func(t *testing.T) {
		srv := guardedServer(t, handlers.ConnLimits{PerClient: 1, Total: 4})
		idle := srv.dial(t, clientA)
		require.Equal(t, 204, idle.get(t, "/"))
		again := srv.dial(t, clientA)
		again.send(t, "/")
		resp, err := http.ReadResponse(again.r, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Equal(t, 204, idle.get(t, "/"), "the client's idle connection stays open")
	})
}

// pipeListener hands the guard the server ends of in-memory connections,
// each from the peer address the test names.
type pipeListener struct{ conns chan net.Conn }

func (l *pipeListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (l *pipeListener) Close() error   { return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv6loopback, Port: 443} }

type peerConn struct {
	net.Conn
	peer net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.peer }

// TestConnGuardCountsIPv6ByPrefix: with IPv6Prefix 64, two addresses of
// one /64 are one client, and an address of another /64 is another; with
// 128 each address counts apart.
func TestConnGuardCountsIPv6ByPrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix   int
		accepted map[string]bool // the second connection, by peer
	}{
		{prefix: 64, accepted: map[string]bool{"2001:db8::2": false, "2001:db8:0:1::1": true, "127.0.0.2": true}},
		{prefix: 56, accepted: map[string]bool{"2001:db8::2": false, "2001:db8:0:1::1": false, "2001:db8:0:100::1": true}},
		{prefix: 128, accepted: map[string]bool{"2001:db8::2": true, "2001:db8:0:1::1": true}},
	} {
		t.Run(fmt.Sprintf("/%d", tc.prefix), func(t *testing.T) {
			for peer, want := range tc.accepted {
				t.Run(peer, func(t *testing.T) {
					ln := &pipeListener{conns: make(chan net.Conn)}
					guard := handlers.GuardListener(ln, handlers.ConnLimits{PerClient: 1, Total: 10, IPv6Prefix: tc.prefix})
					accepted := make(chan net.Conn, 2)
					go func() {
						for {
							c, err := guard.Accept()
							if err != nil {
								return
							}
							accepted <- c
						}
					}()
					t.Cleanup(func() { close(ln.conns) })
					connect := func(ip string) net.Conn {
						server, client := net.Pipe()
						t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
						ln.conns <- peerConn{Conn: server, peer: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
						return client
					}
					first := "2001:db8::1"
					if net.ParseIP(peer).To4() != nil {
						first = "127.0.0.1"
					}
					connect(first)
					<-accepted
					client := connect(peer)
					if want {
						select {
						case <-accepted:
						case <-time.After(5 * time.Second):
							t.Fatalf("%s was refused after %s", peer, first)
						}
						return
					}
					require.NoError(t, client.SetDeadline(time.Now().Add(5*time.Second)))
					_, err := io.WriteString(client, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
					require.NoError(t, err)
					resp, err := http.ReadResponse(bufio.NewReader(client), nil)
					require.NoError(t, err)
					require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s counts as %s's client", peer, first)
				})
			}
		})
	}
}
