package testkit

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
)

// SQLGate is a TCP proxy between one API instance and PostgreSQL that
// stops one statement on its way, without a hook in the product: the first
// time the client's bytes carry Pattern (a statement's text, which the
// client sends when it first prepares the statement on a connection), that
// connection's bytes are held before they reach the server, until Release.
// The instance is then parked between two statements of its own, as a
// debugger's breakpoint or a long pause would park it, while the test moves
// others. Every other byte passes through.
type SQLGate struct {
	// Upstream is PostgreSQL's host:port; Pattern the text to stop at.
	Upstream string
	Pattern  []byte

	addr      string
	mu        sync.Mutex
	tripped   bool
	arrived   chan struct{}
	release   chan struct{}
	releaseMu sync.Once
}

// Start serves the gate on a free loopback port until the test ends and
// returns its host:port (the instance's database host). A connection still
// held then is released.
func (g *SQLGate) Start(t testing.TB) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.addr, g.arrived, g.release = ln.Addr().String(), make(chan struct{}), make(chan struct{})
	var conns sync.WaitGroup
	t.Cleanup(func() {
		g.Release()
		_ = ln.Close()
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { g.serve(c) })
		}
	}()
	return g.addr
}

// Arrived is closed once the statement is held.
func (g *SQLGate) Arrived() <-chan struct{} { return g.arrived }

// Release lets the held statement through (and every later byte).
func (g *SQLGate) Release() { g.releaseMu.Do(func() { close(g.release) }) }

func (g *SQLGate) serve(client net.Conn) {
	defer client.Close()
	server, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", g.Upstream)
	if err != nil {
		return
	}
	defer server.Close()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(client, server)
		done <- struct{}{}
	}()
	go func() {
		g.forward(server, client)
		done <- struct{}{}
	}()
	<-done
}

// forward copies the client's bytes to the server, holding the chunk in
// which Pattern completes, if the gate has not tripped yet. The last bytes
// of each chunk are kept, so that a pattern split across two is found.
func (g *SQLGate) forward(server io.Writer, client io.Reader) {
	buf := make([]byte, 32<<10)
	var tail []byte
	for {
		n, err := client.Read(buf)
		if n > 0 {
			seen := append(tail, buf[:n]...)
			if bytes.Contains(seen, g.Pattern) && g.trip() {
				<-g.release
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
			keep := min(len(seen), len(g.Pattern))
			tail = append(tail[:0], seen[len(seen)-keep:]...)
		}
		if err != nil {
			return
		}
	}
}

// trip reports whether this is the first sight of the pattern.
func (g *SQLGate) trip() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tripped {
		return false
	}
	g.tripped = true
	close(g.arrived)
	return true
}
