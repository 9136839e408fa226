package app_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// idleHolder holds idle kept-alive connections to an API from one loopback
// address, as many as the API lets it: each is served one request and
// then left open, costing its holder nothing.
type idleHolder struct {
	dialer *net.Dialer
	addr   string
	held   []net.Conn
}

// topUp opens connections until the API refuses one: the address is then
// at MAX_CONNS_PER_CLIENT, whatever the API closed in the meantime. It
// returns how many it opened.
func (h *idleHolder) topUp() (int, error) {
	opened := 0
	for {
		conn, err := h.dialer.Dial("tcp", h.addr)
		if err != nil {
			return opened, err
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			_ = conn.Close()
			return opened, fmt.Errorf("from %s: %w", h.dialer.LocalAddr, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			_ = conn.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				return opened, nil
			}
			return opened, fmt.Errorf("from %s: %d", h.dialer.LocalAddr, resp.StatusCode)
		}
		_ = conn.SetDeadline(time.Time{})
		h.held = append(h.held, conn)
		opened++
	}
}

// TestIdleConnectionsYieldAtTheCap is issue 45's lock-out: a few addresses
// take every place of MAX_CONNS with idle kept-alive connections, and top
// them up again whenever the API closes one, while a client from another
// address comes five times. It is served every time: at the cap the
// connection idle the longest yields its place. Before, it got 429
// too_many_connections 5 times in 5. Both of the setups: the
// defaults (16 addresses of 256, 127.0.0.10-25) and a small one.
func TestIdleConnectionsYieldAtTheCap(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	for _, tc := range []struct {
		name                  string
		maxConns, perClient   int
		addresses, perAddress int
	}{
		{name: "4 addresses of 16 at MAX_CONNS=64", maxConns: 64, perClient: 16, addresses: 4, perAddress: 16},
		{name: "16 addresses of 256 at the defaults", maxConns: 4096, perClient: 256, addresses: 16, perAddress: 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.maxConns, tc.addresses*tc.perAddress, "the holders fill the cap exactly")
			api := apptest.StartBinary(t, bin, testkit.DatabaseURL(t, database.SQLite), apptest.Env(
				fmt.Sprintf("MAX_CONNS=%d", tc.maxConns), fmt.Sprintf("MAX_CONNS_PER_CLIENT=%d", tc.perClient)))
			holders := make([]*idleHolder, tc.addresses)
			for i := range holders {
				from := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(10+i))}
				holders[i] = &idleHolder{dialer: &net.Dialer{LocalAddr: from, Timeout: 5 * time.Second}, addr: api.Addr}
			}
			t.Cleanup(func() {
				for _, h := range holders {
					for _, c := range h.held {
						_ = c.Close()
					}
				}
			})

			start := time.Now()
			var wg sync.WaitGroup
			opened := make([]int, len(holders))
			errs := make([]error, len(holders))
			for i, h := range holders {
				wg.Go(func() { opened[i], errs[i] = h.topUp() })
			}
			wg.Wait()
			for i := range holders {
				require.NoError(t, errs[i])
				require.Equal(t, tc.perAddress, opened[i], "address %d holds its share", i)
			}
			t.Logf("%d idle connections from %d addresses hold every place of MAX_CONNS=%d (%s)",
				tc.maxConns, tc.addresses, tc.maxConns, time.Since(start).Round(time.Millisecond))

			served := 0
			for range 5 {
				// The holders take back any place the API gave away.
				for _, h := range holders {
					_, err := h.topUp()
					require.NoError(t, err)
				}
				resp, body := rawAnswer(t, otherClient, api.Addr, "GET /healthz HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n")
				if resp.StatusCode == http.StatusOK {
					served++
				} else {
					t.Logf("refused: %d %s", resp.StatusCode, body)
				}
			}
			require.Equal(t, 5, served, "a new client from another address served %d times in 5", served)
		})
	}
}
