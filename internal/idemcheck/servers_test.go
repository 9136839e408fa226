package idemcheck_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Two small order APIs the catalogue is proven on without starting any
// binary: a careful one that keeps every rule, and a naive one that makes
// the usual mistakes. Both serve the same routes:
//
//	POST /v1/orders     {"customer_id": "...", "amount": 1250} -> 201 order, Location
//	POST /v1/customers  {"customer_id": "...", "amount": 1250} -> 201 customer (another path)
//	GET  /v1/orders?customer_id=...                             -> {"data": [orders]}
//
// Credentials are "Authorization: Bearer sk_a" or "sk_b". An amount that is
// not positive is 400; customer_id "fail" is 503 the first time under a key
// (a fault before any effect, as a provider that is down). Creating an order
// takes a few milliseconds, as real work does: that is the window in which
// concurrent copies meet.

const work = 50 * time.Millisecond

// shop is the business both servers run: orders and customers per
// merchant, and the transient fault.
type shop struct {
	mu        sync.Mutex
	next      int
	orders    map[string][]map[string]any // merchant -> orders
	failedFor map[string]bool             // keys whose first fault has happened
}

func newShop() *shop {
	return &shop{orders: map[string][]map[string]any{}, failedFor: map[string]bool{}}
}

func merchant(r *http.Request) string {
	switch r.Header.Get("Authorization") {
	case "Bearer sk_a":
		return "a"
	case "Bearer sk_b":
		return "b"
	}
	return ""
}

func problem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"about:blank","title":%q,"status":%d,"code":%q}`, code, status, code)
}

// serve is the business handler, behind whichever idempotency layer.
func (s *shop) serve(w http.ResponseWriter, r *http.Request) {
	m := merchant(r)
	if m == "" {
		problem(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/orders":
		s.mu.Lock()
		data := []map[string]any{}
		for _, o := range s.orders[m] {
			if o["customer_id"] == r.URL.Query().Get("customer_id") {
				data = append(data, o)
			}
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	case r.Method == http.MethodPost && (r.URL.Path == "/v1/orders" || r.URL.Path == "/v1/customers"):
		var in struct {
			CustomerID string `json:"customer_id"`
			Amount     int    `json:"amount"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Amount <= 0 || in.CustomerID == "" {
			problem(w, http.StatusBadRequest, "validation_failed")
			return
		}
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		if in.CustomerID == "fail" && !s.failedFor[key] {
			s.failedFor[key] = true
			s.next++
			n := s.next
			s.mu.Unlock()
			problem(w, http.StatusServiceUnavailable, fmt.Sprintf("unavailable_%d", n))
			return
		}
		s.mu.Unlock()
		time.Sleep(work)
		s.mu.Lock()
		s.next++
		kind := "ord"
		if r.URL.Path == "/v1/customers" {
			kind = "cus"
		}
		o := map[string]any{"id": fmt.Sprintf("%s_%d", kind, s.next), "customer_id": in.CustomerID, "amount": in.Amount}
		if kind == "ord" {
			s.orders[m] = append(s.orders[m], o)
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", r.URL.Path+"/"+o["id"].(string))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(o)
	default:
		problem(w, http.StatusMethodNotAllowed, "method_not_allowed")
	}
}

// stored is an answer kept under a key.
type stored struct {
	status int
	header http.Header
	body   []byte
}

// naiveServer makes the usual mistakes, each on purpose:
//   - a request without a key simply executes;
//   - keys are not validated, and not scoped to the client;
//   - no fingerprint: any request under a known key gets the stored answer;
//   - get-then-set: it looks the key up, runs the request, then stores the
//     answer, with nothing held in between, so concurrent copies all run;
//   - it stores every answer, 400 and 5xx included, and only status and
//     body (no Location on a replay, no replay marker).
func naiveServer() http.Handler {
	s := newShop()
	var mu sync.Mutex
	keys := map[string]stored{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if key == "" || r.Method == http.MethodGet {
			s.serve(w, r)
			return
		}
		mu.Lock()
		st, ok := keys[key]
		mu.Unlock()
		if ok {
			w.WriteHeader(st.status)
			_, _ = w.Write(st.body)
			return
		}
		rec := httptest.NewRecorder()
		s.serve(rec, r)
		mu.Lock()
		keys[key] = stored{status: rec.Code, body: rec.Body.Bytes()}
		mu.Unlock()
		copyAnswer(w, rec.Code, rec.Header(), rec.Body.Bytes())
	})
}

func copyAnswer(w http.ResponseWriter, status int, h http.Header, body []byte) {
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// record is the careful server's state of one (merchant, key).
type record struct {
	fingerprint string
	done        chan struct{} // closed when the answer is known
	answer      *stored       // nil while running, and after an answer it does not keep
}

// carefulServer keeps every rule the catalogue checks, in the simplest way
// that works in one process.
func carefulServer() http.Handler {
	s := newShop()
	var mu sync.Mutex
	records := map[string]*record{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			s.serve(w, r)
			return
		}
		m := merchant(r)
		if m == "" {
			problem(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		values, present := r.Header["Idempotency-Key"]
		if !present {
			problem(w, http.StatusBadRequest, "idempotency_key_missing")
			return
		}
		key := values[0]
		if len(key) == 0 || len(key) > 255 || strings.IndexFunc(key, func(c rune) bool { return c < 0x21 || c > 0x7e }) >= 0 {
			problem(w, http.StatusBadRequest, "idempotency_key_invalid")
			return
		}
		raw, _ := io.ReadAll(r.Body)
		fp := r.Method + " " + r.URL.Path + " " + canonical(raw)
		id := m + "\x00" + key

		for {
			mu.Lock()
			rec, ok := records[id]
			if !ok {
				rec = &record{fingerprint: fp, done: make(chan struct{})}
				records[id] = rec
				mu.Unlock()
				break
			}
			mu.Unlock()
			if rec.fingerprint != fp {
				problem(w, http.StatusUnprocessableEntity, "idempotency_key_reused")
				return
			}
			select {
			case <-rec.done:
			case <-time.After(2 * time.Second):
				w.Header().Set("Retry-After", "1")
				problem(w, http.StatusConflict, "idempotency_request_in_progress")
				return
			}
			mu.Lock()
			answer := rec.answer
			mu.Unlock()
			if answer != nil {
				w.Header().Set("Idempotent-Replayed", "true")
				copyAnswer(w, answer.status, answer.header, answer.body)
				return
			}
			// The original's answer was not kept: this request runs it.
		}

		r.Body = io.NopCloser(bytes.NewReader(raw))
		rec := httptest.NewRecorder()
		s.serve(rec, r)
		mu.Lock()
		held := records[id]
		if rec.Code >= 200 && rec.Code < 300 {
			held.answer = &stored{status: rec.Code, header: rec.Header().Clone(), body: rec.Body.Bytes()}
		} else {
			delete(records, id) // nothing kept: the key may be sent again
		}
		close(held.done)
		mu.Unlock()
		copyAnswer(w, rec.Code, rec.Header(), rec.Body.Bytes())
	})
}

// canonical re-encodes a JSON body with sorted members and no whitespace:
// enough of RFC 8785 for these bodies.
func canonical(raw []byte) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
