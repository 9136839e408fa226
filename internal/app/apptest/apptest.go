package apptest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// defaults is the environment every API under test starts with; a test's
// own settings (Env) come after them and win.
var defaults = []string{
	"DEMO_SEED=true",
	"IDEMPOTENCY_WAIT=5s",
	"LOG_LEVEL=warn",
	"LOG_FORMAT=json", // Logs returns JSON lines, which tests search
	"DB_MAX_CONNS=10",
}

// API is one API under test, serving on a loopback address.
type API struct {
	// URL is the base URL, http://127.0.0.1:<port>.
	URL string
	// Addr is host:port.
	Addr string
	// DatabaseURL is the database the API was started on.
	DatabaseURL string
	// Provider is the mock provider started beside the API by WithProvider
	// or WithSilentProvider; nil otherwise.
	Provider *provider.Running
	// Process is the running binary, for StartBinary; nil in-process.
	Process *testkit.Process
	// Handler is the program's handler (the router, without the answer
	// check around it), for Start; nil for StartBinary.
	Handler http.Handler

	logs *testkit.SyncBuffer
	stop func() error
}

// An Option changes how Start runs the API.
type Option func(*settings)

type settings struct {
	unchecked bool
	env       []string
	app       []app.Option
	provider  *provider.Config
	webhooks  bool
}

// Env adds settings (KEY=value) after the defaults; a later one wins.
func Env(kv ...string) Option {
	return func(s *settings) { s.env = append(s.env, kv...) }
}

// Unchecked leaves the API's answers out of the check against the OpenAPI
// document (spec.go): only for a deliberately different program, such as
// the mistakes tests' naive idempotency middleware.
func Unchecked() Option {
	return func(s *settings) { s.unchecked = true }
}

// WithApp passes options to app.New (a phase hook, another middleware).
// In-process only.
func WithApp(opts ...app.Option) Option {
	return func(s *settings) { s.app = append(s.app, opts...) }
}

// WithProvider starts the mock provider with cfg beside the API, as the
// separate service PROVIDER_URL names, sending its signed webhooks to the
// API. In-process only.
func WithProvider(cfg provider.Config) Option {
	return func(s *settings) { s.provider, s.webhooks = &cfg, true }
}

// WithSilentProvider is WithProvider without webhooks: the API learns an
// outcome only from its own calls and the reconciler, and nothing changes
// the database behind the test's back.
func WithSilentProvider(cfg provider.Config) Option {
	return func(s *settings) { s.provider, s.webhooks = &cfg, false }
}

// Start serves the API in-process, through app.New and Serve as cmd/api
// does, on a free loopback port and the database at databaseURL. Its
// background workers run; it stops gracefully when the test ends (its logs
// are printed if the test failed), or at Stop.
func Start(t testing.TB, databaseURL string, opts ...Option) *API {
	t.Helper()
	var s settings
	for _, o := range opts {
		o(&s)
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := &API{Addr: ln.Addr().String(), DatabaseURL: databaseURL, logs: &testkit.SyncBuffer{}}
	a.URL = "http://" + a.Addr
	env := append([]string{"HTTP_ADDR=" + a.Addr, "DATABASE_URL=" + databaseURL}, defaults...)
	if s.provider != nil {
		cfg := *s.provider
		if s.webhooks {
			cfg.WebhookURL = a.URL + "/v1/webhooks/provider"
		}
		a.Provider, err = provider.StartInProcess(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = a.Provider.Shutdown(context.Background()) })
		env = append(env, "PROVIDER_URL="+a.Provider.URL)
	}
	cfg, err := config.Load(append(env, s.env...))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	// Every answer is checked against the OpenAPI document (spec.go), until
	// the test's cleanup has begun stopping the API.
	var stopping atomic.Bool
	appOpts := s.app
	var unwrapped http.Handler
	if !s.unchecked {
		check := checkServed(t, stopping.Load)
		appOpts = append([]app.Option{app.WithHandlerWrapper(func(h http.Handler) http.Handler {
			unwrapped = h
			return check(h)
		})}, s.app...)
	}
	program, err := app.New(ctx, cfg, app.NewLogger(a.logs, cfg.LogLevel), ln, appOpts...)
	if err != nil {
		cancel()
		_ = ln.Close()
		t.Fatalf("api did not start: %v\n%s", err, a.logs.String())
	}
	a.Handler = program.Handler()
	if unwrapped != nil {
		a.Handler = unwrapped // the router itself, not the check around it
	}
	served := make(chan error, 1)
	go func() { served <- program.Serve(ctx, ln) }()
	var once sync.Once
	var stopErr error
	a.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-served:
			case <-time.After(30 * time.Second):
				stopErr = errors.New("the api did not stop within 30s")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		_ = a.Stop()
		stopping.Store(true)
		if t.Failed() {
			t.Logf("api logs:\n%s", a.Logs())
		}
	})
	return a
}

// StartReplica starts another instance beside first, as a second replica
// behind a load balancer: first's database and first's payment provider,
// with opts of its own. first must have been started WithProvider or
// WithSilentProvider: otherwise each instance runs a mock provider of its
// own, and a payment retried on the replica reaches a provider that never
// saw the first call.
func StartReplica(t testing.TB, first *API, opts ...Option) *API {
	t.Helper()
	require.NotNil(t, first.Provider, "StartReplica: start the first instance WithProvider or WithSilentProvider, so that both call one provider")
	return Start(t, first.DatabaseURL, slices.Concat(opts, []Option{Env("PROVIDER_URL=" + first.Provider.URL)})...)
}

// Stop stops an API that Start started, as SIGTERM stops the program: no
// new requests, the ones in flight finish, then the workers stop. It
// returns what Serve returned, nil after a graceful stop.
func (a *API) Stop() error { return a.stop() }

// Logs is everything the API has logged so far, as JSON lines.
func (a *API) Logs() string { return a.logs.String() }

// Binaries builds cmd/api and cmd/provider for the test.
func Binaries(t testing.TB) (api, provider string) {
	t.Helper()
	bins := testkit.Binaries(t, "cmd/api", "cmd/provider")
	return bins[0], bins[1]
}

// StartBinary runs the built API (see Binaries) as a process on a free
// loopback port and the database at databaseURL, with the same defaults as
// Start, and kills it when the test ends. The process may be signalled,
// killed and started again through API.Process.
func StartBinary(t testing.TB, bin, databaseURL string, opts ...Option) *API {
	t.Helper()
	var s settings
	for _, o := range opts {
		o(&s)
	}
	if s.provider != nil || len(s.app) > 0 {
		t.Fatal("apptest: WithProvider, WithSilentProvider and WithApp are for Start, not StartBinary")
	}
	addr := testkit.FreeAddr(t)
	env := append(append([]string{"DATABASE_URL=" + databaseURL}, defaults...), s.env...)
	p := testkit.StartProcess(t, bin, addr, env...)
	registerBinary(t, addr)
	return &API{URL: "http://" + addr, Addr: addr, DatabaseURL: databaseURL, Process: p, logs: p.Log.(*testkit.SyncBuffer)}
}

// Serve serves h on a free loopback port until the test ends and returns
// its base URL: for a deliberately different server, or a proxy in front
// of the API.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// CreateOrder creates an order of OrderBody as apiKey under a new key and
// returns its id.
func (a *API) CreateOrder(t testing.TB, apiKey string) string {
	t.Helper()
	created := Call(t, "POST", a.URL+"/v1/orders", apiKey, "order-"+NewKey(), OrderBody)
	require.Equal(t, 201, created.Status, string(created.Body))
	return created.JSON(t)["id"].(string)
}

// Pay pays orderID as acme under key with the payment method.
func (a *API) Pay(t testing.TB, orderID, key, method string) Answer {
	t.Helper()
	return Call(t, "POST", a.URL+"/v1/orders/"+orderID+"/payments", "sk_test_acme", key, `{"payment_method":"`+method+`"}`)
}

// Count runs a SELECT count(*) ... query in the API's database.
func (a *API) Count(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	return testkit.Count(t, a.DatabaseURL, query, args...)
}

// Text runs a SELECT of one text value in the API's database.
func (a *API) Text(t testing.TB, query string, args ...any) string {
	t.Helper()
	return testkit.Text(t, a.DatabaseURL, query, args...)
}

// Charges asks the provider started beside the API for every charge made
// for one of our payments.
func (a *API) Charges(t testing.TB, paymentID string) []map[string]any {
	t.Helper()
	require.NotNil(t, a.Provider, "the API was started without WithProvider")
	return Ledger(t, a.Provider.URL+"/v1/charges?reference="+paymentID)
}
