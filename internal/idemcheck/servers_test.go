package idemcheck_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Small order APIs the catalogue is proven on without starting any binary:
// a careful one that keeps every rule, a naive one that makes the usual
// mistakes, and the careful one with one flaw at a time (see flaws), each
// a defect seen in a published idempotency middleware. All serve the same
// routes:
//
//	POST /v1/orders     {"customer_id": "...", "amount": 1250} -> 201 order, Location
//	POST /v1/customers  {"customer_id": "...", "amount": 1250} -> 201 customer (another path)
//	GET  /v1/orders?customer_id=...                             -> {"data": [orders]}
//
// Credentials are "Authorization: Bearer sk_a" or "sk_b". An amount that is
// not positive is 400; customer_id "fail" is 503 the first time under a key
// (a fault before any effect, as a provider that is down); "crash" makes
// the handler panic every time (an exception thrown before the answer),
// which the server's outermost layer answers 500; "declined" is 402 with
// the failed payment's id, a final outcome. Creating an order takes a few milliseconds, as real work
// does: that is the window in which concurrent copies meet.

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
		switch in.CustomerID {
		case "crash":
			panic("the handler failed before answering")
		case "declined":
			s.mu.Lock()
			s.next++
			n := s.next
			s.mu.Unlock()
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusPaymentRequired)
			fmt.Fprintf(w, `{"type":"about:blank","title":"payment_declined","status":402,"code":"payment_declined","payment_id":"pay_%d"}`, n)
			return
		}
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
	case r.URL.Path == "/v1/orders" || r.URL.Path == "/v1/customers":
		problem(w, http.StatusMethodNotAllowed, "method_not_allowed")
	default:
		problem(w, http.StatusNotFound, "not_found")
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
	return recovering(naiveMiddleware())
}

func naiveMiddleware() http.Handler {
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

// recovering is a framework's last resort, outside any idempotency layer:
// a handler that panics is answered 500, whatever the layer did or did not
// clean up on the way out.
func recovering(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				problem(w, http.StatusInternalServerError, "internal_error")
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// flaws are the mistakes the careful server can be given, one at a time.
// The zero value is the careful server itself.
type flaws struct {
	// routeFirst: routes are matched before the idempotency layer, as Gin
	// does: a path or method no route serves is 404 or 405 whatever the
	// key (not a flaw).
	routeFirst bool
	// acceptAnyKey: keys are not validated (an empty key is a key).
	// sharedKeys: keys are not scoped to the client (the credentials are
	// checked, but two clients' same key is one record).
	acceptAnyKey bool
	sharedKeys   bool
	// lockOnPanic: a handler that panics leaves its record running, since
	// the layer releases it only when the handler returns (no deferred
	// release): the published middlewares' crash lock. lockFor then says
	// when a running record may be taken over; zero is never.
	lockOnPanic bool
	lockFor     time.Duration
	// looseEqual: bodies are compared value by value with JavaScript's
	// loose equality (2 == "2", 0 == "", 1 == true), not by fingerprint.
	// orderedFingerprint: the fingerprint is over the body with its
	// whitespace removed but its members in their order; rawFingerprint:
	// over the body's bytes.
	looseEqual         bool
	orderedFingerprint bool
	rawFingerprint     bool
	// ttl: a finished record replays for this long; zero is forever.
	// racyExpiry: an expired record is deleted and the request run without
	// holding the key, so copies that meet the expired record all run.
	ttl        time.Duration
	racyExpiry bool
	// storeErrors: every answer is stored and replayed, 4xx and 5xx
	// included (Stripe documents that it replays 500s: not a flaw by
	// itself). dropErrorType: a replayed error loses its Content-Type.
	storeErrors   bool
	dropErrorType bool
	// wait is how long a request waits for a running original before 409;
	// zero is 2 s. noRetryAfter: that 409 does not say when to come back.
	wait         time.Duration
	noRetryAfter bool
}

// record is the careful server's state of one (merchant, key).
type record struct {
	method, path string
	body         any       // the request's JSON value, for looseEqual
	fingerprint  string    // method, path and canonical body
	started      time.Time // when the request that holds it began
	expires      time.Time // when its answer stops replaying; zero: never
	done         chan struct{}
	answer       *stored // nil while running, and after an answer it does not keep
}

// carefulServer keeps every rule the catalogue checks, in the simplest way
// that works in one process.
func carefulServer() http.Handler { return flawedServer(flaws{}) }

// flawedServer is the careful server with the flaws f.
func flawedServer(f flaws) http.Handler {
	s := newShop()
	var mu sync.Mutex
	records := map[string]*record{}
	wait := f.wait
	if wait == 0 {
		wait = 2 * time.Second
	}
	layer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			s.serve(w, r)
			return
		}
		if f.routeFirst && (r.Method != http.MethodPost || r.URL.Path != "/v1/orders" && r.URL.Path != "/v1/customers") {
			s.serve(w, r) // no route: 404 or 405, before the layer sees the key
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
		if !f.acceptAnyKey && (len(key) == 0 || len(key) > 255 || strings.IndexFunc(key, func(c rune) bool { return c < 0x21 || c > 0x7e }) >= 0) {
			problem(w, http.StatusBadRequest, "idempotency_key_invalid")
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var body any
		_ = json.Unmarshal(raw, &body)
		fp := canonical(raw)
		switch {
		case f.orderedFingerprint:
			var b bytes.Buffer
			_ = json.Compact(&b, raw)
			fp = b.String()
		case f.rawFingerprint:
			fp = string(raw)
		}
		mine := &record{method: r.Method, path: r.URL.Path, body: body, fingerprint: r.Method + " " + r.URL.Path + " " + fp}
		id := m + "\x00" + key
		if f.sharedKeys {
			id = key
		}

		for {
			now := time.Now()
			mu.Lock()
			rec, ok := records[id]
			expired := ok && rec.answer != nil && !rec.expires.IsZero() && now.After(rec.expires)
			stale := ok && rec.answer == nil && f.lockFor > 0 && now.Sub(rec.started) > f.lockFor
			if expired && f.racyExpiry {
				// Flawed: the expired record goes, and the request runs
				// without taking the key, so the copy that comes next
				// finds no record and runs the operation too.
				delete(records, id)
				mu.Unlock()
				mine = nil
				break
			}
			if !ok || expired || stale {
				mine.started, mine.done = now, make(chan struct{})
				records[id] = mine
				mu.Unlock()
				break
			}
			mu.Unlock()
			if !sameRequest(f, rec, mine) {
				problem(w, http.StatusUnprocessableEntity, "idempotency_key_reused")
				return
			}
			select {
			case <-rec.done:
			case <-time.After(wait):
				if !f.noRetryAfter {
					w.Header().Set("Retry-After", "1")
				}
				problem(w, http.StatusConflict, "idempotency_request_in_progress")
				return
			}
			mu.Lock()
			answer := rec.answer
			mu.Unlock()
			if answer != nil {
				w.Header().Set("Idempotent-Replayed", "true")
				h := answer.header
				if f.dropErrorType && answer.status >= 400 {
					h = h.Clone()
					h.Del("Content-Type")
				}
				copyAnswer(w, answer.status, h, answer.body)
				return
			}
			// The original's answer was not kept: this request runs it.
		}

		// finish keeps the answer (or frees the key) and wakes the waiters;
		// a panic's answer is never kept.
		finish := func(status int, h http.Header, b []byte, panicked bool) {
			mu.Lock()
			defer mu.Unlock()
			if mine == nil { // the racy expiry's request, holding nothing
				if panicked {
					return
				}
				records[id] = &record{method: r.Method, path: r.URL.Path, body: body, fingerprint: r.Method + " " + r.URL.Path + " " + fp,
					done: closed(), answer: &stored{status: status, header: h.Clone(), body: b}, expires: time.Now().Add(f.ttl)}
				return
			}
			if !panicked && (status >= 200 && status < 300 || status == http.StatusPaymentRequired || f.storeErrors) {
				mine.answer = &stored{status: status, header: h.Clone(), body: b}
				if f.ttl > 0 {
					mine.expires = time.Now().Add(f.ttl)
				}
			} else if records[id] == mine {
				delete(records, id) // nothing kept: the key may be sent again
			}
			close(mine.done)
		}
		if !f.lockOnPanic {
			defer func() {
				if p := recover(); p != nil {
					finish(http.StatusInternalServerError, nil, nil, true)
					panic(p) // the framework answers it
				}
			}()
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		rec := httptest.NewRecorder()
		s.serve(rec, r)
		finish(rec.Code, rec.Header(), rec.Body.Bytes(), false)
		copyAnswer(w, rec.Code, rec.Header(), rec.Body.Bytes())
	})
	return recovering(layer)
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// sameRequest says whether a request is the one its key's record holds.
func sameRequest(f flaws, held, req *record) bool {
	if f.looseEqual {
		return held.method == req.method && held.path == req.path && looselyEqual(held.body, req.body)
	}
	return held.fingerprint == req.fingerprint
}

// looselyEqual compares two JSON values as JavaScript's == compares
// scalars, member by member: the comparison some middlewares make.
func looselyEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !looselyEqual(v, y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !looselyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if a == b {
		return true
	}
	na, oka := toNumber(a)
	nb, okb := toNumber(b)
	return oka && okb && na == nb
}

// toNumber is JavaScript's ToNumber for the scalars of a JSON value.
func toNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case string:
		if strings.TrimSpace(x) == "" {
			return 0, true
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
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
