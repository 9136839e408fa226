package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the provider's parsers: its request bodies and
// Idempotency-Key (server side), and its answers and events (client side).
// Seed corpora are in testdata/fuzz/<FuzzName>.

// fuzzServer is a provider whose faults are instant, so that no input can
// make a fuzz iteration wait.
func fuzzServer(tb testing.TB) *Server {
	tb.Helper()
	s := New(Config{SlowDelay: time.Millisecond, LostResponseHold: time.Millisecond, DuplicateWebhookRate: -1})
	tb.Cleanup(s.Close)
	return s
}

// FuzzCreateCharge posts arbitrary keys and bodies to POST /v1/charges. Every
// refusal is problem+json and leaves the ledger as it was; a charge is made
// only for a body that decodes strictly and validates, under the key sent,
// and the same request again replays it.
func FuzzCreateCharge(f *testing.F) {
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, key string, body []byte) {
		post := func() *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/v1/charges", bytes.NewReader(body))
			req.Header["Idempotency-Key"] = []string{key}
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, req)
			return w
		}
		before := len(s.Charges())
		w := post()
		if w.Code >= 400 {
			requireAnyProblem(t, w)
			if w.Code != http.StatusServiceUnavailable && len(s.Charges()) != before {
				t.Fatalf("refused with %d but charged", w.Code)
			}
			return
		}
		var req ChargeRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || len(req.validate()) > 0 || !validKey(key) {
			t.Fatalf("answered %d to key %q body %q", w.Code, key, body)
		}
		ch, ok := s.ChargeByKey(key)
		if !ok || ch.Reference != req.Reference || ch.Amount != req.Amount {
			t.Fatalf("no charge under %q matching %+v: %+v", key, req, ch)
		}
		if again := post(); again.Code != w.Code || again.Body.String() != w.Body.String() {
			t.Fatalf("replay differs: %d %s / %d %s", w.Code, w.Body, again.Code, again.Body)
		}
	})
}

// FuzzCreateRefund does the same for POST /v1/refunds.
func FuzzCreateRefund(f *testing.F) {
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, key string, body []byte) {
		req := httptest.NewRequest("POST", "/v1/refunds", bytes.NewReader(body))
		req.Header["Idempotency-Key"] = []string{key}
		w := httptest.NewRecorder()
		before := len(s.Refunds())
		s.Handler().ServeHTTP(w, req)
		if w.Code >= 400 {
			requireAnyProblem(t, w)
			if len(s.Refunds()) != before {
				t.Fatalf("refused with %d but refunded", w.Code)
			}
			return
		}
		var rr RefundRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rr); err != nil || len(rr.validate()) > 0 || !validKey(key) {
			t.Fatalf("answered %d to key %q body %q", w.Code, key, body)
		}
	})
}

// requireAnyProblem checks only that w is problem+json of its own status:
// the fuzzer does not know which code an input earns (RequireProblem, in
// testkit, checks one code).
func requireAnyProblem(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%d answered as %q: %s", w.Code, ct, w.Body)
	}
	var p problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Code == "" || p.Status != w.Code {
		t.Fatalf("not a problem: %s (%v)", w.Body, err)
	}
}

// FuzzSortResponse is the client's reading of the provider's answers. The
// status decides the kind of error, never the body; a 2xx is a result only
// with a body that is a well-formed charge.
func FuzzSortResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		status = 100 + (status%500+500)%500 // 100..599
		var ch Charge
		err := sortResponse("create charge", status, body, nil, &ch)
		var apiErr *APIError
		switch {
		case status >= 200 && status <= 299:
			if err == nil {
				if ch.wellFormed() != nil {
					t.Fatalf("accepted a charge that is not well formed: %q", body)
				}
			} else if !errors.Is(err, ErrUnknownOutcome) {
				t.Fatalf("2xx error %v is not an unknown outcome", err)
			}
		case status == 503 || status == 429:
			if !errors.Is(err, ErrNotExecuted) {
				t.Fatalf("%d: %v", status, err)
			}
		case status >= 500:
			if !errors.Is(err, ErrUnknownOutcome) {
				t.Fatalf("%d: %v", status, err)
			}
		case status >= 400:
			if !errors.As(err, &apiErr) || apiErr.Status != status || apiErr.Code == "" {
				t.Fatalf("%d: %v", status, err)
			}
			if errors.Is(err, ErrNotFound) != (status == 404) {
				t.Fatalf("%d: ErrNotFound is %v", status, errors.Is(err, ErrNotFound))
			}
		default:
			if !errors.Is(err, ErrUnknownOutcome) {
				t.Fatalf("%d: %v", status, err)
			}
		}
	})
}

// FuzzEventObject decodes the object of webhook events: a charge only from a
// charge object, a refund only from a refund object, never a panic.
func FuzzEventObject(f *testing.F) {
	f.Fuzz(func(t *testing.T, object []byte) {
		ev := Event{ID: "evt_1", Type: EventChargeSucceeded, Data: EventData{Object: object}}
		if c, err := ev.Charge(); err == nil && c.Object != "charge" {
			t.Fatalf("charge from %q", object)
		}
		if r, err := ev.Refund(); err == nil && r.Object != "refund" {
			t.Fatalf("refund from %q", object)
		}
		if _, err := ev.Charge(); err == nil && strings.TrimSpace(string(object)) == "" {
			t.Fatalf("charge from nothing")
		}
	})
}
