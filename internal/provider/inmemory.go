package provider

import (
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
)

// InMemoryURL is the base URL of a provider StartInMemory serves: no host
// resolves to it, and only its Transport reaches it.
const InMemoryURL = "http://provider.in-memory"

// StartInMemory serves a new Server for cfg without a listener: requests
// reach it only through the returned Running's Transport, never over the
// network. Production's in-process provider runs so, where nobody else may
// reach the mock. Shutdown stops it as it stops a listening one.
func StartInMemory(cfg Config) *Running {
	srv := New(cfg)
	return &Running{URL: InMemoryURL, Server: srv, Transport: inMemory{srv.Handler()}, served: make(chan error)}
}

// inMemory is an http.RoundTripper that serves each request with h in the
// caller's process. It tells an httptrace observer that a connection was
// had as soon as the request is handed over, so a caller that gives up
// later treats the call as possibly executed (unknown), as it would over a
// socket.
type inMemory struct{ h http.Handler }

func (t inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(r.URL.String(), InMemoryURL) {
		return nil, &httpError{"the in-memory provider serves " + InMemoryURL + " only"}
	}
	if trace := httptrace.ContextClientTrace(r.Context()); trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{})
	}
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-done:
		return w.Result(), nil
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// httpError is a transport error that names itself.
type httpError struct{ msg string }

func (e *httpError) Error() string { return e.msg }
