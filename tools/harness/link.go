package harness

import (
	"context"
	"net"
	"sync"
)

// Link is a TCP proxy on a free loopback port to one upstream address,
// which a test can stall: nothing passes either way while connections stay
// open, as when a network path goes quiet without resetting anything. A
// standby streaming from its primary through a Link stops receiving the
// write-ahead log when it stalls, while the primary goes on committing (or,
// with synchronous replication, goes on waiting).
//
// It is written here rather than taken from a proxy library (toxiproxy's
// server is a whole program): the harness needs only "pass" and "hold".
type Link struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	closed  bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// StartLink listens on a free loopback port and forwards every connection
// to upstream.
func StartLink(upstream string) (*Link, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	l.cond = sync.NewCond(&l.mu)
	l.wg.Go(l.accept)
	return l, nil
}

// Addr is the host:port to connect to instead of upstream.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Stall holds every byte from now on, in both directions, until Resume.
func (l *Link) Stall() {
	l.mu.Lock()
	l.stalled = true
	l.mu.Unlock()
}

// Resume lets the held bytes and every later one pass again.
func (l *Link) Resume() {
	l.mu.Lock()
	l.stalled = false
	l.mu.Unlock()
	l.cond.Broadcast()
}

// Close stops listening and cuts every connection; held bytes are dropped.
func (l *Link) Close() {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.cond.Broadcast()
	_ = l.ln.Close()
	l.wg.Wait()
}

func (l *Link) accept() {
	for {
		down, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		up, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", l.upstream)
		if err != nil {
			_ = down.Close() // the upstream is down: so is the link
			continue
		}
		if !l.track(down, up) {
			return
		}
		l.wg.Go(func() { l.pipe(up, down) })
		l.wg.Go(func() { l.pipe(down, up) })
	}
}

// track registers a connection pair, or closes it when the link is closed.
func (l *Link) track(conns ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range conns {
		if l.closed {
			_ = c.Close()
			continue
		}
		l.conns[c] = struct{}{}
	}
	return !l.closed
}

// pipe copies src to dst, holding each chunk while the link is stalled,
// and closes both when either side ends.
func (l *Link) pipe(dst, src net.Conn) {
	defer func() {
		l.mu.Lock()
		delete(l.conns, dst)
		delete(l.conns, src)
		l.mu.Unlock()
		_ = dst.Close()
		_ = src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !l.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, a reset or the link closed: the pair ends
		}
	}
}

// pass waits while the link is stalled and reports whether it is still
// open.
func (l *Link) pass() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.stalled && !l.closed {
		l.cond.Wait()
	}
	return !l.closed
}
