package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// balancer is a small HTTP load balancer in front of the API instances. It
// sends each request to the next instance in turn and skips one that
// refuses the connection (killed). An instance that dies mid-request, or an
// answer the balancer drops on purpose (dropRate, after the API has answered
// in full), reaches the client as a cut connection: exactly what a retrying
// client must survive. Delivered answers to keyed POSTs can be recorded.
type balancer struct {
	targets []string
	url     string
	srv     *http.Server
	hc      *http.Client
	next    atomic.Uint64

	dropRate float64
	mu       sync.Mutex // guards rnd
	rnd      *rand.Rand
	dropped  atomic.Int64
	rec      *recorder
}

// startBalancer listens on a free loopback port.
func startBalancer(targets []string, dropRate float64, seed uint64, rec *recorder) (*balancer, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &balancer{
		targets: targets, url: "http://" + ln.Addr().String(),
		hc:       &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}},
		dropRate: dropRate, rnd: rand.New(rand.NewPCG(seed, 7)), rec: rec,
	}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

func (b *balancer) close() { _ = b.srv.Close() }

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		cut(w)
		return
	}
	first := b.next.Add(1)
	for i := range len(b.targets) {
		target := b.targets[(first+uint64(i))%uint64(len(b.targets))]
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+target+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			cut(w)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := b.hc.Do(req)
		if err != nil {
			if refused(err) {
				continue // that instance is down; nothing was sent
			}
			cut(w) // it died mid-request: the client cannot know what happened
			return
		}
		answer, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			cut(w)
			return
		}
		if b.drop() {
			b.dropped.Add(1)
			cut(w)
			return
		}
		if key := r.Header.Get("Idempotency-Key"); b.rec != nil && key != "" && r.Method == http.MethodPost {
			b.rec.add(key, resp.StatusCode, answer, resp.Header.Get("Idempotent-Replayed") == "true")
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
		return
	}
	cut(w) // every instance is down
}

func (b *balancer) drop() bool {
	if b.dropRate <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rnd.Float64() < b.dropRate
}

// cut closes the client's connection without an answer.
func cut(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// refused reports whether err is a failure to connect, so the request never
// reached the instance.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
