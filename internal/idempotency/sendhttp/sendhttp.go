// Package sendhttp makes an Effect's outside call over HTTP and sorts how it
// ended into the three outcomes the idempotency core needs: a definitive
// answer, not executed (idempotency.ErrNotExecuted), or unknown.
package sendhttp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/idemkeys/payments/internal/idempotency"
)

// errUnknownOutcome: the outside call may or may not have had its effect
// (the connection died after the request was written, a timeout, a 5xx
// other than 503 and 429, an answer cut short). An Effect needs no name
// for it: any error of Send but idempotency.ErrNotExecuted is an unknown outcome, which
// asking again under the same key, or Find, settles.
var errUnknownOutcome = errors.New("the outside call's outcome is unknown")

// Do makes an outside call over HTTP for an Effect's Send or Find
// and sorts what happened into the three outcomes the core needs:
//
//   - a definitive answer (any 2xx or 4xx, its body read whole, at most
//     maxBody bytes): status and body, nil error; what it means is the
//     caller's to decode;
//   - not executed, an error wrapping idempotency.ErrNotExecuted: no connection was
//     ever had (nothing was written), or the service answered 503 or 429,
//     which a service that deduplicates by key promises to send before any
//     effect (do not use Do for one that does not);
//   - unknown, any other error: anything else (the
//     connection died after a write, the deadline passed, another 5xx, a
//     3xx, a 2xx whose body could not be read).
//
// The request must carry its Idempotency-Key (the call's key): that is what
// makes Go's own re-sending safe. net/http's Transport sends a request again
// by itself on a kept-alive connection that died under it when the request
// carries Idempotency-Key (or X-Idempotency-Key) and its body can be
// replayed (GetBody, which http.NewRequest sets for in-memory bodies); the
// service sees the same key twice and executes once. A request without the
// header is refused as not executed, before anything is sent.
func Do(client *http.Client, req *http.Request, maxBody int64) (status int, body []byte, err error) {
	if req.Header.Get(idempotency.HeaderKey) == "" {
		return 0, nil, fmt.Errorf("%w: %s %s: no %s header", idempotency.ErrNotExecuted, req.Method, req.URL.Path, idempotency.HeaderKey)
	}
	if client == nil {
		client = http.DefaultClient
	}
	var gotConn atomic.Bool
	traced := tracesConnections(client)
	if traced {
		ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
		})
		req = req.WithContext(ctx)
	}
	resp, err := client.Do(req)
	if err != nil {
		if neverSent(err, traced, gotConn.Load()) {
			return 0, nil, fmt.Errorf("%w: %w", idempotency.ErrNotExecuted, err)
		}
		return 0, nil, fmt.Errorf("%w: %w", errUnknownOutcome, err)
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	status = resp.StatusCode
	switch {
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		return status, body, fmt.Errorf("%w: answered %d", idempotency.ErrNotExecuted, status)
	case status >= 500 || status < 200 || (status >= 300 && status < 400):
		return status, body, fmt.Errorf("%w: answered %d", errUnknownOutcome, status)
	case readErr != nil && status < 300:
		return status, body, fmt.Errorf("%w: answered %d, then: %w", errUnknownOutcome, status, readErr)
	}
	return status, body, nil
}

// tracesConnections says whether client's transport reports the
// connections it gets through httptrace: net/http's own does; a wrapper of
// unknown make may not, and then only a dial error proves nothing was sent.
func tracesConnections(client *http.Client) bool {
	if client.Transport == nil {
		return true
	}
	_, ok := client.Transport.(*http.Transport)
	return ok
}

// neverSent tells whether a failed request cannot have reached the
// service. Without a connection nothing was written. Once a connection was
// had, even a later dial error (net/http re-sending on a fresh connection)
// leaves the first attempt in doubt. Untraced, only a failed dial or name
// lookup proves it.
func neverSent(err error, traced, gotConn bool) bool {
	if gotConn {
		return false
	}
	if traced {
		return true
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return (errors.As(err, &opErr) && opErr.Op == "dial") || errors.As(err, &dnsErr)
}
