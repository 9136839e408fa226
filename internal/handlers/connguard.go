package handlers

import (
	"bytes"
	"container/list"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Errors of the connection layer, answered by the error table like any
// other; no handler ever sees them.
var (
	errMalformedRequest   = errors.New("malformed request")
	errHeaderTooLarge     = errors.New("request header too large")
	errNotImplemented     = errors.New("unsupported transfer encoding")
	errHTTPVersion        = errors.New("unsupported HTTP version")
	errExpectationFailed  = errors.New("unsupported expectation")
	errTooManyConnections = errors.New("too many connections")
)

// ConnLimits bound the connections a ConnGuard lets through.
type ConnLimits struct {
	// PerClient is the most connections open at once from one client
	// (the peer's IP, or its IPv6 prefix; a proxy in front counts as one
	// client).
	PerClient int
	// Total is the most connections open at once in all.
	Total int
	// IPv6Prefix is how many leading bits of an IPv6 peer address name
	// one client. A host is commonly given a whole /64, so counting its
	// addresses apart would let it open PerClient connections from each of
	// them. Zero (or 128) counts every IPv6 address apart.
	IPv6Prefix int
}

// GuardListener wraps the API's listener so that the server's every
// answer is problem+json and no client holds more than its share of
// connections.
//
// net/http writes a few answers itself, as text/plain, before any handler
// runs: 431 for a header block over MaxHeaderBytes, 400 for a request line
// or header it cannot parse, 505 for an HTTP version other than 1.x, 501
// for an unknown Transfer-Encoding; and an empty 417 for an Expect other
// than 100-continue. It offers no hook for them, but it writes each in one
// Write on the connection, with fixed headers that no answer of a handler
// has (a handler's answer always carries Date, and Connection sorts before
// Content-Type). The wrapped connection recognises those writes and sends
// the error table's answer instead.
//
// At Total, the connection idle the longest (kept alive between requests)
// is closed to make room for the new one: an idle connection costs its
// client nothing to hold for HTTP_IDLE_TIMEOUT, so a few addresses could
// otherwise keep every other client out without sending a request. Only
// past a limit with no idle connection to close, or past PerClient, does a
// new connection get 429 too_many_connections with Retry-After; it is
// closed and never reaches the server. The server must report its
// connections' states to ConnState for the guard to know which are idle.
func GuardListener(ln net.Listener, limits ConnLimits) *ConnGuard {
	return &ConnGuard{Listener: ln, limits: limits, open: map[string]int{}}
}

// serverAnswers are the error table's answers that replace Go's own, by
// status, as raw HTTP/1.1 responses.
var serverAnswers = map[int][]byte{
	http.StatusBadRequest:                  rawProblem(errMalformedRequest),
	http.StatusRequestHeaderFieldsTooLarge: rawProblem(errHeaderTooLarge),
	http.StatusNotImplemented:              rawProblem(errNotImplemented),
	http.StatusHTTPVersionNotSupported:     rawProblem(errHTTPVersion),
}

// tooManyConnections is the answer to a connection over a limit.
var tooManyConnections = rawProblem(errTooManyConnections)

// rawProblem is the table's answer to err as a whole HTTP/1.1 response that
// closes the connection.
func rawProblem(err error) []byte {
	a, _ := errorAnswer(err)
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", a.Status, http.StatusText(a.Status))
	b.WriteString("Content-Type: application/problem+json\r\n")
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range a.Header {
			if !yield(k) {
				return
			}
		}
	}) {
		if k == "Content-Type" {
			continue
		}
		for _, v := range a.Header[k] {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\nConnection: close\r\n\r\n", len(a.Body))
	b.Write(a.Body)
	return b.Bytes()
}

// goErrorHeaders are the headers net/http's own error answers carry
// (server.go, conn.serve), right after their status line.
const goErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// goExpectationFailed is how net/http's own 417 starts, in HTTP/1.1 and
// 1.0, for a request whose Expect is not 100-continue. Go sends it
// through the response writer (response.sendExpectationFailed), so it
// carries Date, but before any route: the one header before Date is the
// Connection it sets, where a handler's answer has its Content-Type.
var goExpectationFailed = [][]byte{
	[]byte("HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nDate: "),
	[]byte("HTTP/1.0 417 Expectation Failed\r\nConnection: close\r\nDate: "),
}

// expectationFailed replaces net/http's own 417.
var expectationFailed = rawProblem(errExpectationFailed)

// serverAnswer is the problem+json answer replacing b when b is one of
// net/http's own error answers, else nil.
func serverAnswer(b []byte) []byte {
	for _, start := range goExpectationFailed {
		if bytes.HasPrefix(b, start) {
			return expectationFailed
		}
	}
	const prefix = "HTTP/1.1 "
	if len(b) < len(prefix)+3 || !bytes.HasPrefix(b, []byte(prefix)) {
		return nil
	}
	end := bytes.Index(b, []byte(goErrorHeaders))
	if end < 0 || bytes.Contains(b[:end], []byte("\r\n")) {
		return nil
	}
	status := 0
	for _, c := range b[len(prefix) : len(prefix)+3] {
		if c < '0' || c > '9' {
			return nil
		}
		status = status*10 + int(c-'0')
	}
	return serverAnswers[status]
}

// rejectingMax bounds the connections being refused at once; past it a
// connection over a limit is closed without an answer.
const rejectingMax = 256

// ConnGuard is a listener that bounds the connections it lets through
// (GuardListener).
type ConnGuard struct {
	net.Listener
	limits ConnLimits

	mu        sync.Mutex
	open      map[string]int // open connections by client
	total     int
	rejecting int
	idle      list.List // of *guardedConn, the longest idle first
}

// Accept waits for the next connection within the limits, making room for
// it by closing the connection idle the longest when the total is reached,
// and answers the connections it refuses.
func (g *ConnGuard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientAddress(c.RemoteAddr(), g.limits.IPv6Prefix)
		g.mu.Lock()
		over := g.limits.PerClient > 0 && g.open[client] >= g.limits.PerClient
		var yielded *guardedConn
		if !over && g.limits.Total > 0 && g.total >= g.limits.Total {
			yielded = g.yieldIdleLocked()
			over = yielded == nil
		}
		if !over {
			g.open[client]++
			g.total++
			g.mu.Unlock()
			if yielded != nil {
				// Its place is already given back; the server's goroutine
				// reading it sees the close and ends.
				_ = yielded.Conn.Close()
			}
			return &guardedConn{Conn: c, guard: g, client: client}, nil
		}
		answer := g.rejecting < rejectingMax
		if answer {
			g.rejecting++
		}
		g.mu.Unlock()
		if !answer {
			_ = c.Close()
			continue
		}
		go g.refuse(c)
	}
}

// ConnState is the http.Server's ConnState hook of a server that serves
// the guard's connections: it keeps the order in which they became idle.
func (g *ConnGuard) ConnState(c net.Conn, state http.ConnState) {
	gc, ok := c.(*guardedConn)
	if !ok || gc.guard != g {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if gc.released {
		return
	}
	if gc.idle != nil {
		g.idle.Remove(gc.idle)
		gc.idle = nil
	}
	if state == http.StateIdle {
		gc.idle = g.idle.PushBack(gc)
	}
}

// yieldIdleLocked takes the connection idle the longest out of the count,
// for the caller to close, or returns nil when none is idle.
func (g *ConnGuard) yieldIdleLocked() *guardedConn {
	front := g.idle.Front()
	if front == nil {
		return nil
	}
	gc := front.Value.(*guardedConn)
	g.releaseLocked(gc)
	return gc
}

// refuse answers a connection over a limit and closes it. It reads what
// the client sent first (briefly, and a bounded amount): closing a socket
// with unread data resets it, and the client would lose the answer.
func (g *ConnGuard) refuse(c net.Conn) {
	defer func() {
		g.mu.Lock()
		g.rejecting--
		g.mu.Unlock()
	}()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 4096)
	_, _ = c.Read(buf)
	_, _ = c.Write(tooManyConnections)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	for range 16 {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

// releaseLocked gives a connection's place back, once.
func (g *ConnGuard) releaseLocked(gc *guardedConn) {
	if gc.released {
		return
	}
	gc.released = true
	if gc.idle != nil {
		g.idle.Remove(gc.idle)
		gc.idle = nil
	}
	g.total--
	if g.open[gc.client]--; g.open[gc.client] <= 0 {
		delete(g.open, gc.client)
	}
}

// clientAddress names the client of a peer: its IP, or for IPv6 the
// prefix of its first ipv6Prefix bits (when 0 < ipv6Prefix < 128); the
// host, or the whole address, when it is not an IP.
func clientAddress(a net.Addr, ipv6Prefix int) string {
	host := a.String()
	if tcp, ok := a.(*net.TCPAddr); ok {
		host = tcp.IP.String() // an IPv4-mapped address prints as IPv4
	} else if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().Is6() || ipv6Prefix <= 0 || ipv6Prefix >= 128 {
		return host
	}
	p, err := ip.Prefix(ipv6Prefix)
	if err != nil {
		return host
	}
	return p.String()
}

// guardedConn is a connection a GuardListener let through: it rewrites
// net/http's own answers and gives its place back when closed.
type guardedConn struct {
	net.Conn
	guard  *ConnGuard
	client string
	// Under the guard's lock: whether its place was given back, and its
	// element in the guard's idle list while it is idle.
	released bool
	idle     *list.Element
}

func (c *guardedConn) Write(b []byte) (int, error) {
	if answer := serverAnswer(b); answer != nil {
		if _, err := c.Conn.Write(answer); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// CloseWrite keeps net/http's half-close after a 431 (closeWriteAndWait),
// which lets the client read the answer before the connection goes.
func (c *guardedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *guardedConn) Close() error {
	c.guard.mu.Lock()
	c.guard.releaseLocked(c)
	c.guard.mu.Unlock()
	return c.Conn.Close()
}
