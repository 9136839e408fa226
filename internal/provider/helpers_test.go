package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// waitFor is how long tests poll for asynchronous state (webhooks, held
// answers) before they fail.
const waitFor = 5 * time.Second

// pollEvery is the polling period while waiting.
const pollEvery = 5 * time.Millisecond

// startProvider serves a provider over real HTTP for the test's lifetime.
func startProvider(t *testing.T, cfg provider.Config) *provider.Running {
	t.Helper()
	running, err := provider.StartInProcess(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, running.Shutdown(ctx))
	})
	return running
}

// visa is a valid charge request; tests vary what they need.
func visa(ref string) provider.ChargeRequest {
	return provider.ChargeRequest{Amount: 2500, Currency: "BRL", PaymentMethod: provider.MethodCardVisa, Reference: ref}
}

func withMethod(req provider.ChargeRequest, method string) provider.ChargeRequest {
	req.PaymentMethod = method
	return req
}

// rawResponse is an HTTP answer read in full.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// doRaw sends one request without the Client, to check the wire format.
// A nil headers map sends none; body may be a string (sent as is) or a
// value (sent as JSON).
func doRaw(t *testing.T, method, url string, headers map[string]string, body any) rawResponse {
	t.Helper()
	var reader io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		reader = bytes.NewBufferString(b)
	default:
		encoded, err := json.Marshal(b)
		require.NoError(t, err)
		reader = bytes.NewReader(encoded)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, reader)
	require.NoError(t, err)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: data}
}

// requireProblem checks an RFC 9457 answer with the given status and code.
func requireProblem(t *testing.T, resp rawResponse, status int, code string) map[string]any {
	t.Helper()
	return testkit.RequireProblem(t, resp.status, resp.header, resp.body, status, code)
}

// errorKind sorts a client error into the three kinds and fails the test if
// it is more than one of them.
func errorKind(t *testing.T, err error) string {
	t.Helper()
	var kinds []string
	if errors.Is(err, provider.ErrNotExecuted) {
		kinds = append(kinds, "not_executed")
	}
	if errors.Is(err, provider.ErrUnknownOutcome) {
		kinds = append(kinds, "unknown")
	}
	var apiErr *provider.APIError
	if err == nil || errors.As(err, &apiErr) {
		kinds = append(kinds, "definitive")
	}
	require.Len(t, kinds, 1, "error %v must be exactly one kind", err)
	return kinds[0]
}

// receiver is a webhook endpoint that checks signatures and records what
// arrives.
type receiver struct {
	URL string

	secret string
	// status answers the nth delivery attempt (from 1); nil answers 200.
	status func(attempt int) int

	mu       sync.Mutex
	attempts int
	badSigs  int
	events   []provider.Event // deliveries answered 2xx, in arrival order
}

func newReceiver(t *testing.T, secret string, status func(attempt int) int) *receiver {
	t.Helper()
	rcv := &receiver{secret: secret, status: status}
	srv := httptest.NewServer(http.HandlerFunc(rcv.serveHTTP))
	t.Cleanup(srv.Close)
	rcv.URL = srv.URL
	return rcv
}

func (rcv *receiver) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	rcv.attempts++
	if err := provider.VerifySignature(rcv.secret, r.Header.Get(provider.SignatureHeader), body, time.Now(), 0); err != nil {
		rcv.badSigs++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	status := http.StatusOK
	if rcv.status != nil {
		status = rcv.status(rcv.attempts)
	}
	if status >= 200 && status <= 299 {
		var ev provider.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rcv.events = append(rcv.events, ev)
	}
	w.WriteHeader(status)
}

func (rcv *receiver) Events() []provider.Event {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	return append([]provider.Event(nil), rcv.events...)
}

func (rcv *receiver) Attempts() int {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	return rcv.attempts
}

func (rcv *receiver) BadSignatures() int {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	return rcv.badSigs
}

// waitForEvents waits until n events of type eventType have arrived and
// returns them.
func (rcv *receiver) waitForEvents(t *testing.T, eventType string, n int) []provider.Event {
	t.Helper()
	var found []provider.Event
	require.Eventually(t, func() bool {
		found = found[:0]
		for _, ev := range rcv.Events() {
			if ev.Type == eventType {
				found = append(found, ev)
			}
		}
		return len(found) >= n
	}, waitFor, pollEvery, "waiting for %d %s events", n, eventType)
	return found
}
