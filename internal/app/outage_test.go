package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// tcpProxy forwards a loopback port to a TCP server and can be cut (the
// listener closed and every live connection dropped, as when the database
// host goes away) and restored on the same port.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string // the proxy's own address, fixed at the first listen

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	loops sync.WaitGroup
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{t: t, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.loops.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return // closed by cut
			}
			p.loops.Go(func() { p.forward(client) })
		}
	})
}

// forward pipes one client connection to a fresh connection to the target.
func (p *tcpProxy) forward(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		return // cut while dialling
	}
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = client.Close()
			_ = server.Close()
			p.untrack(client, server)
		})
	}
	var pipes sync.WaitGroup
	pipes.Go(func() { _, _ = io.Copy(server, client); closeBoth() })
	pipes.Go(func() { _, _ = io.Copy(client, server); closeBoth() })
	pipes.Wait()
}

func (p *tcpProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *tcpProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// cut closes the listener, so new connections are refused, and drops every
// live connection; it returns when no forwarding goroutine is left.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.loops.Wait()
}

// restore listens again on the same port.
func (p *tcpProxy) restore() {
	p.t.Helper()
	var ln net.Listener
	testkit.Eventually(p.t, 5*time.Second, "proxy listens again on "+p.addr, func() bool {
		var err error
		ln, err = net.Listen("tcp", p.addr)
		return err == nil
	})
	p.serve(ln)
}

// viaProxy rewrites the host and port of a postgres:// URL to addr.
func viaProxy(t *testing.T, dbURL, addr string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Host = addr
	return u.String()
}

// outageClient gives up on any one request after a few seconds, so that a
// hanging API fails the test instead of stalling it. Requests that may
// meet the outage go through apptest.Do with it, which returns an error
// rather than failing the test.
var outageClient = &http.Client{Timeout: 5 * time.Second}

// requireUnavailable checks the 503 problem the contract promises while the
// database is down.
func requireUnavailable(t *testing.T, a apptest.Answer) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, a.Status, string(a.Body))
	require.Equal(t, "application/problem+json", a.Header.Get("Content-Type"))
	p := a.JSON(t)
	require.Equal(t, "service_unavailable", p["code"])
	require.True(t, strings.HasSuffix(p["type"].(string), "/service_unavailable"), p["type"])
	require.EqualValues(t, 503, p["status"])
	require.NotEmpty(t, a.Header.Get("Retry-After"))
}

// readiness returns /readyz's status and its database check.
func readiness(t *testing.T, apiURL string) (int, string) {
	t.Helper()
	a, err := apptest.Do(apptest.Request{Method: "GET", URL: apiURL + "/readyz", Client: outageClient})
	if err != nil {
		return 0, err.Error()
	}
	var r struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	require.NoError(t, json.Unmarshal(a.Body, &r), string(a.Body))
	require.NotEmpty(t, r.Status)
	return a.Status, r.Checks["database"]
}

// TestDatabaseOutage puts a TCP proxy between the API and PostgreSQL and cuts
// it: writes answer 503 service_unavailable, readiness fails while liveness
// holds, and once the database is back the same key does the work once.
func TestDatabaseOutage(t *testing.T) {
	realURL := testkit.DatabaseURL(t, database.Postgres)
	pg, err := url.Parse(realURL)
	require.NoError(t, err)
	proxy := startProxy(t, pg.Host)

	api := apptest.Start(t, viaProxy(t, realURL, proxy.addr),
		apptest.WithProvider(provider.Config{DuplicateWebhookRate: -1, SlowDelay: 2 * time.Second}),
		apptest.Env("PROVIDER_TIMEOUT=5s",
			// A record that the outage left executing (the payment in flight)
			// cannot be released while the database is gone; the API keeps
			// trying, so a retry can resume it as soon as the database is back,
			// long before the (default, 30 s) lock timeout.
			"IDEMPOTENCY_WAIT=200ms", "RECONCILE_INTERVAL=1h"))
	prov := api.Provider
	// Counts go to the real server, which the outage does not reach.
	count := func(t *testing.T, query string, args ...any) int64 {
		t.Helper()
		return testkit.Count(t, realURL, query, args...)
	}

	// Warm up: the merchant is cached, the pool holds connections that the
	// cut will break.
	order := api.CreateOrder(t, "sk_test_acme")
	status, db := readiness(t, api.URL)
	require.Equal(t, 200, status)
	require.Equal(t, "up", db)

	// outage cuts the database for the duration of fn; the proxy is back
	// when it returns, even if fn failed.
	outage := func(fn func()) {
		proxy.cut()
		restored := false
		defer func() {
			if !restored {
				proxy.restore()
			}
		}()
		fn()
		proxy.restore()
		restored = true
	}

	t.Run("orders: 503 while down, then the same key creates one order", func(t *testing.T) {
		key := apptest.NewKey()
		before := count(t, "SELECT count(*) FROM orders")
		outage(func() {
			var a apptest.Answer
			// Connections that were idle in the pool may take an attempt
			// or two to be found broken; each attempt is bounded.
			for attempt := 1; ; attempt++ {
				var err error
				a, err = apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders", APIKey: "sk_test_acme", Key: key, Body: apptest.OrderBody, Client: outageClient})
				require.NoError(t, err, "the API answers during an outage")
				if a.Status == http.StatusServiceUnavailable || attempt == 3 {
					break
				}
			}
			requireUnavailable(t, a)

			status, db := readiness(t, api.URL)
			require.Equal(t, http.StatusServiceUnavailable, status)
			require.Equal(t, "down", db)
			live, err := apptest.Do(apptest.Request{Method: "GET", URL: api.URL + "/healthz", Client: outageClient})
			require.NoError(t, err)
			require.Equal(t, 200, live.Status)
			require.Equal(t, before, count(t, "SELECT count(*) FROM orders"), "nothing was done")
		})

		testkit.Eventually(t, 10*time.Second, "readyz up again", func() bool {
			status, db := readiness(t, api.URL)
			return status == 200 && db == "up"
		})
		var created apptest.Answer
		testkit.Eventually(t, 10*time.Second, "the same key creates the order", func() bool {
			var err error
			created, err = apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders", APIKey: "sk_test_acme", Key: key, Body: apptest.OrderBody, Client: outageClient})
			return err == nil && created.Status == http.StatusCreated
		})
		require.Empty(t, created.Header.Get("Idempotent-Replayed"), "executed, not replayed: the outage stored nothing")
		require.Equal(t, before+1, count(t, "SELECT count(*) FROM orders"))
		replay, err := apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders", APIKey: "sk_test_acme", Key: key, Body: apptest.OrderBody, Client: outageClient})
		require.NoError(t, err)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		require.Equal(t, created.Body, replay.Body)
		require.Equal(t, before+1, count(t, "SELECT count(*) FROM orders"))
	})

	t.Run("a refused body takes no connection: 400 while the database is gone", func(t *testing.T) {
		// The body is decoded and validated before the transaction (which
		// begins at the first statement), so a body that is refused is
		// answered without the database: 400, not 503.
		outage(func() {
			for _, body := range []string{wideOrder(), manyMembers(70_000), `{"customer_id":"","currency":"xx","items":[]}`} {
				a, err := apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders", APIKey: "sk_test_acme", Key: apptest.NewKey(), Body: body, Client: outageClient})
				require.NoError(t, err)
				require.Equal(t, http.StatusBadRequest, a.Status, string(a.Body[:min(len(a.Body), 300)]))
				require.Equal(t, "validation_failed", a.JSON(t)["code"])
			}
		})
	})

	t.Run("payment refused while down, then charged once", func(t *testing.T) {
		key := apptest.NewKey()
		outage(func() {
			var a apptest.Answer
			for attempt := 1; ; attempt++ {
				var err error
				a, err = apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders/" + order + "/payments", APIKey: "sk_test_acme", Key: key, Body: `{"payment_method":"pm_card_visa"}`, Client: outageClient})
				require.NoError(t, err)
				if a.Status == http.StatusServiceUnavailable || attempt == 3 {
					break
				}
			}
			requireUnavailable(t, a)
			require.Empty(t, prov.Server.Charges(), "nothing reached the provider")
		})
		var paid apptest.Answer
		testkit.Eventually(t, 10*time.Second, "the same key pays", func() bool {
			var err error
			paid, err = apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders/" + order + "/payments", APIKey: "sk_test_acme", Key: key, Body: `{"payment_method":"pm_card_visa"}`, Client: outageClient})
			return err == nil && paid.Status == http.StatusCreated
		})
		p := paid.JSON(t)
		require.Equal(t, "succeeded", p["status"])
		require.Len(t, api.Charges(t, p["id"].(string)), 1)
		require.EqualValues(t, 1, count(t, "SELECT count(*) FROM payments WHERE order_id = ?", order))
	})

	t.Run("outage while the provider charges: the retry resumes, one charge", func(t *testing.T) {
		order := api.CreateOrder(t, "sk_test_acme")
		key := apptest.NewKey()
		charged := len(prov.Server.Charges())
		first := make(chan apptest.Answer, 1)
		go func() {
			a, err := apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders/" + order + "/payments", APIKey: "sk_test_acme", Key: key, Body: `{"payment_method":"pm_fault_slow"}`, Client: outageClient})
			if err != nil {
				a = apptest.Answer{Body: []byte(err.Error())}
			}
			first <- a
		}()
		// pm_fault_slow charges at once and answers SlowDelay later: cut
		// the database in between, when the charge is made but not yet
		// recorded.
		testkit.Eventually(t, 5*time.Second, "the provider charged", func() bool {
			return len(prov.Server.Charges()) > charged
		})
		outage(func() {
			a := <-first
			t.Logf("the payment in flight answered %d %s", a.Status, a.Body)
			require.NotEqual(t, 0, a.Status, "the API answers: %s", a.Body)
			require.NotEqual(t, http.StatusInternalServerError, a.Status, string(a.Body))
			if a.Status != http.StatusAccepted {
				requireUnavailable(t, a)
			}
		})
		var paid apptest.Answer
		testkit.Eventually(t, 10*time.Second, "a retry with the same key gets the final answer", func() bool {
			var err error
			paid, err = apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders/" + order + "/payments", APIKey: "sk_test_acme", Key: key, Body: `{"payment_method":"pm_fault_slow"}`, Client: outageClient})
			return err == nil && paid.Status == http.StatusCreated
		})
		p := paid.JSON(t)
		require.Equal(t, "succeeded", p["status"])
		require.Len(t, api.Charges(t, p["id"].(string)), 1, "one charge, outage or not")
		require.Len(t, prov.Server.Charges(), charged+1)
		require.EqualValues(t, 1, count(t, "SELECT count(*) FROM payments WHERE order_id = ?", order))
		o, err := apptest.Do(apptest.Request{Method: "GET", URL: api.URL + "/v1/orders/" + order, APIKey: "sk_test_acme", Client: outageClient})
		require.NoError(t, err)
		require.Equal(t, "paid", o.JSON(t)["status"])
	})
}

// TestDatabaseRefusesNewConnections: a database that refuses connections at
// connect time (ALLOW_CONNECTIONS false, every session terminated, so the
// pool must open new connections) is an outage: every keyed create answers
// 503 with Retry-After, never 500, and the same keys create one order each
// once connections are allowed again.
func TestDatabaseRefusesNewConnections(t *testing.T) {
	base := testkit.PostgresURL()
	admin, err := database.Open(base, database.Options{MaxOpenConns: 2})
	if err == nil {
		err = admin.Ping(context.Background())
	}
	if err != nil {
		testkit.MissingService(t, "PostgreSQL", err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	name := fmt.Sprintf("refuse_%d", time.Now().UnixNano())
	require.NoError(t, admin.Exec("CREATE DATABASE "+name).Error)
	t.Cleanup(func() {
		_ = admin.Exec("ALTER DATABASE " + name + " ALLOW_CONNECTIONS true").Error
		_ = admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ?", name).Error
		_ = admin.Exec("DROP DATABASE IF EXISTS " + name).Error
	})
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.Path = "/" + name
	dbURL := u.String()

	api := apptest.Start(t, dbURL)
	api.CreateOrder(t, "sk_test_acme") // the merchant is cached, the pool warm

	require.NoError(t, admin.Exec("ALTER DATABASE "+name+" ALLOW_CONNECTIONS false").Error)
	require.NoError(t, admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ?", name).Error)
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = apptest.NewKey()
		a, err := apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders", APIKey: "sk_test_acme", Key: keys[i], Body: apptest.OrderBody, Client: outageClient})
		require.NoError(t, err)
		requireUnavailable(t, a)
	}
	status, db := readiness(t, api.URL)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "down", db)

	require.NoError(t, admin.Exec("ALTER DATABASE "+name+" ALLOW_CONNECTIONS true").Error)
	for _, key := range keys {
		var a apptest.Answer
		testkit.Eventually(t, 10*time.Second, "the same key creates the order", func() bool {
			var err error
			a, err = apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders", APIKey: "sk_test_acme", Key: key, Body: apptest.OrderBody, Client: outageClient})
			return err == nil && a.Status == http.StatusCreated
		})
		require.Empty(t, a.Header.Get("Idempotent-Replayed"), "the refusals stored nothing")
	}
	require.EqualValues(t, 13, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"))
}
