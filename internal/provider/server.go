package provider

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults for the zero values of Config.
const (
	// DefaultWebhookSecret is the secret shared with the API unless set.
	DefaultWebhookSecret = "whsec_test"
	// DefaultDuplicateWebhookRate is the share of events sent twice.
	DefaultDuplicateWebhookRate = 0.1
	// DefaultSlowDelay is how long pm_fault_slow makes the caller wait.
	DefaultSlowDelay = 2 * time.Second
	// DefaultLostResponseHold caps how long a lost response is held.
	DefaultLostResponseHold = 2 * time.Minute

	defaultWebhookMaxAttempts = 8
	defaultWebhookBackoff     = 500 * time.Millisecond
	maxWebhookBackoff         = time.Minute
	defaultWebhookTimeout     = 10 * time.Second
)

// Config configures a Server. The zero value is usable: no webhooks, no
// chaos, and the default delays.
type Config struct {
	// NoFaults refuses the pm_fault_* payment methods (400, as an unknown
	// method): production's in-process provider, where no client may make
	// the mock lose answers or hold a payment.
	NoFaults bool
	// WebhookURL receives signed events; empty turns webhooks off.
	WebhookURL string
	// WebhookSecret signs events. Empty means DefaultWebhookSecret.
	WebhookSecret string
	// DuplicateWebhookRate is the share (0..1) of events delivered twice on
	// purpose, to keep receivers honest about at-least-once delivery. Zero
	// means DefaultDuplicateWebhookRate; a negative rate turns duplicates off.
	DuplicateWebhookRate float64
	// WebhookDelay holds every event back this long before its first
	// delivery, so a test can make webhooks arrive after the API answered or
	// after the reconciler ran.
	WebhookDelay time.Duration
	// WebhookMaxAttempts bounds the attempts to deliver one copy of an
	// event. Zero means 8.
	WebhookMaxAttempts int
	// WebhookBackoff is the wait after the first failed attempt; it doubles
	// after each further failure, up to a minute. Zero means 500ms.
	WebhookBackoff time.Duration
	// WebhookClient sends the events. Nil means a client with a 10 s
	// timeout over WebhookTransport.
	WebhookClient *http.Client
	// WebhookTransport is the transport of the default WebhookClient; nil
	// means http.DefaultTransport. A delivery carries the context of the
	// request whose effect it announces, so a transport that propagates
	// trace context (tracing.Tracing.Transport) continues that request's
	// trace.
	WebhookTransport http.RoundTripper
	// Instrument, if set, wraps the HTTP handler (tracing.Tracing.Handler:
	// a span per request that continues the caller's trace).
	Instrument func(http.Handler) http.Handler

	// SlowDelay is how long pm_fault_slow waits before answering. Zero means
	// DefaultSlowDelay.
	SlowDelay time.Duration
	// LostResponseHold caps how long a lost response is held for a client
	// that never gives up. Zero means DefaultLostResponseHold.
	LostResponseHold time.Duration

	// Chaos injects faults into ordinary requests, for load tests.
	Chaos Chaos
	// Rand drives chaos and duplicate webhooks. Nil means a randomly seeded
	// source; tests pass a seeded one, e.g. rand.NewPCG(1, 2), to meet the
	// same faults on every run. The Server draws from it under its own lock,
	// so give each Server a source of its own.
	Rand rand.Source
	// Now is the clock for created times and signatures. Nil means time.Now.
	Now func() time.Time
	// Logger receives webhook delivery failures. Nil discards them.
	Logger *slog.Logger
}

// Chaos makes ordinary requests fail at random, for load tests. It applies
// only to the first request under an idempotency key, and not to the
// MethodFault* payment methods, which already fail on purpose; so a client
// that retries with the same key always gets through in the end. Rates are
// shares from 0 to 1; values outside are clamped.
type Chaos struct {
	// LostResponseRate is the share of first requests that take effect but
	// whose answer is held until the client gives up.
	LostResponseRate float64
	// UnavailableRate is the share of first requests answered 503 before any
	// effect.
	UnavailableRate float64
	// Latency is the most random latency added to a first request's answer
	// (after its effect). Zero adds none.
	Latency time.Duration
}

// Server is the mock PSP. Create it with New, serve Handler, and Close it to
// stop webhook deliveries and release held answers.
type Server struct {
	cfg     Config // defaults filled in
	log     *slog.Logger
	now     func() time.Time
	handler http.Handler

	mu     sync.Mutex // guards the fields below; one lock keeps every per-key decision atomic
	ledger ledger
	rnd    *rand.Rand // not safe for concurrent use on its own
	closed bool

	// ctx is cancelled by Close: held answers are released and webhook
	// deliveries stop.
	ctx        context.Context
	cancel     context.CancelFunc
	deliveries sync.WaitGroup // one per event still being delivered
	closeOnce  sync.Once
}

// New returns a Server configured by cfg, with an empty ledger.
func New(cfg Config) *Server {
	cfg = withDefaults(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		now:    cfg.Now,
		ledger: newLedger(),
		rnd:    rand.New(cfg.Rand),
		ctx:    ctx,
		cancel: cancel,
	}
	s.handler = s.routes()
	if cfg.Instrument != nil {
		s.handler = cfg.Instrument(s.handler)
	}
	return s
}

func withDefaults(cfg Config) Config {
	if cfg.WebhookSecret == "" {
		cfg.WebhookSecret = DefaultWebhookSecret
	}
	if cfg.DuplicateWebhookRate == 0 {
		cfg.DuplicateWebhookRate = DefaultDuplicateWebhookRate
	}
	cfg.DuplicateWebhookRate = clampRate(cfg.DuplicateWebhookRate)
	if cfg.WebhookMaxAttempts <= 0 {
		cfg.WebhookMaxAttempts = defaultWebhookMaxAttempts
	}
	if cfg.WebhookBackoff <= 0 {
		cfg.WebhookBackoff = defaultWebhookBackoff
	}
	if cfg.WebhookClient == nil {
		cfg.WebhookClient = &http.Client{Timeout: defaultWebhookTimeout, Transport: cfg.WebhookTransport}
	}
	if cfg.SlowDelay <= 0 {
		cfg.SlowDelay = DefaultSlowDelay
	}
	if cfg.LostResponseHold <= 0 {
		cfg.LostResponseHold = DefaultLostResponseHold
	}
	cfg.Chaos.LostResponseRate = clampRate(cfg.Chaos.LostResponseRate)
	cfg.Chaos.UnavailableRate = clampRate(cfg.Chaos.UnavailableRate)
	cfg.Chaos.Latency = max(cfg.Chaos.Latency, 0)
	if cfg.Rand == nil {
		var seed [32]byte
		_, _ = cryptorand.Read(seed[:]) // never fails, per its documentation
		cfg.Rand = rand.NewChaCha8(seed)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

func clampRate(r float64) float64 { return min(max(r, 0), 1) }

// Handler returns the provider's HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// Close releases answers still held by fault behaviours and stops webhook
// deliveries, waiting for their goroutines to return. Events not yet
// delivered are dropped. Close is safe to call more than once; the Handler
// keeps answering afterwards, without holding answers back and without
// webhooks.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true // no new deliveries may start once we wait for the old ones
		s.mu.Unlock()
		s.cancel()
		s.deliveries.Wait()
	})
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", s.handleCreateCharge)
	mux.HandleFunc("GET /v1/charges", s.handleFindCharges)
	mux.HandleFunc("GET /v1/charges/{id}", s.handleGetCharge)
	mux.HandleFunc("POST /v1/refunds", s.handleCreateRefund)
	mux.HandleFunc("GET /v1/refunds", s.handleFindRefunds)
	mux.HandleFunc("GET /v1/refunds/{id}", s.handleGetRefund)
	mux.HandleFunc("GET /v1/ledger", s.handleLedger)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})

	// The mux would answer these in text/plain; every error here is
	// problem+json, so the known paths get a 405 and the rest a 404 of ours.
	mux.Handle("/v1/charges", methodNotAllowed("GET, POST"))
	mux.Handle("/v1/refunds", methodNotAllowed("GET, POST"))
	mux.Handle("/v1/charges/{id}", methodNotAllowed("GET"))
	mux.Handle("/v1/refunds/{id}", methodNotAllowed("GET"))
	mux.Handle("/v1/ledger", methodNotAllowed("GET"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
	return mux
}

func methodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeProblem(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed here; use "+allow)
	})
}

// idempotencyKey reads the required Idempotency-Key header, or writes the
// problem and returns false.
func idempotencyKey(w http.ResponseWriter, r *http.Request) (string, bool) {
	values := r.Header.Values("Idempotency-Key")
	switch {
	case len(values) == 0:
		writeProblem(w, http.StatusBadRequest, CodeIdempotencyKeyMissing, "the Idempotency-Key header is required")
		return "", false
	case len(values) > 1:
		writeProblem(w, http.StatusBadRequest, CodeIdempotencyKeyInvalid, "send the Idempotency-Key header once")
		return "", false
	case !validKey(values[0]):
		writeProblem(w, http.StatusBadRequest, CodeIdempotencyKeyInvalid,
			"the Idempotency-Key must be 1 to 255 visible ASCII characters")
		return "", false
	}
	return values[0], true
}

func validKey(k string) bool {
	if k == "" || len(k) > MaxIdempotencyKeyLength {
		return false
	}
	for i := range len(k) {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// decodeBody decodes one JSON object into dst, strictly: unknown fields and
// trailing data are errors, so a typo cannot silently change a charge. On
// failure it writes the problem and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("unexpected data after the JSON object")
		}
	}
	if err == nil {
		return true
	}
	if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
		writeProblem(w, http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "the body is larger than 64 KiB")
		return false
	}
	writeProblem(w, http.StatusBadRequest, CodeValidationFailed, "the body is not a valid JSON object: "+err.Error())
	return false
}

// holdAnswer keeps the caller waiting for up to d: the way a fault delays an
// answer. It returns early when the client gives up (there is no one left to
// answer) or the server closes (so shutdown is not stuck behind it). net/http
// notices a client hanging up only after the body was read to EOF, which
// decodeBody always does.
func (s *Server) holdAnswer(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.ctx.Done():
	}
}

// writeCreated answers a create call, new or replayed, with the same status
// and body: a replay must be indistinguishable from the original answer
// apart from the header that says it is one.
func writeCreated(w http.ResponseWriter, replayed bool, v any) {
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, v)
}

// writeJSON writes v with json.Marshal, the same encoding webhook events
// use, so an event's object is byte for byte what the API answered.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own types get here, and they always marshal.
		writeProblem(w, http.StatusInternalServerError, "internal", "encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// newID returns a prefixed random id such as "ch_3x7…".
func newID(prefix string) string {
	return prefix + "_" + strings.ToLower(cryptorand.Text())
}
