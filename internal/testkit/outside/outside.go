// Package outside is an outside service for a fork's tests: the mail API,
// carrier or bank a Guarded endpoint calls, reduced to what the idempotency
// protocol has to survive. It keeps one effect per Idempotency-Key (a copy
// sent again under the key gets the first one's answer), can answer 503
// before any effect, can lose an answer after the effect, and refuses for
// good what Refuse says. It is a real HTTP handler: serve it with
// httptest.NewServer, point the fork's client at it, and count Effects.
//
//	POST any path, Idempotency-Key: K, a JSON object
//	    -> 201 the object with "id" and "key" added, the same for every copy
//	       under K; 422 for what Refuse refuses, or for K reused with
//	       another object; 503 while Unavailable lasts; 400 without a key
//	       or an object
//	GET any path ?idempotency_key=K
//	    -> 200 the effect under K, or 404
//
// It stands in for a service outside this project, as the payment
// provider's mock (internal/provider) does for the payments; the databases,
// Redis and NATS of a test stay real.
package outside

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"sync"
	"time"
)

// Service is the outside service. Its zero value answers every well-formed
// request at once; set the fields before it serves.
type Service struct {
	// Prefix starts the id of every effect ("fx_" when empty): "msg_1",
	// "msg_2", ...
	Prefix string
	// LoseFirst, when set, holds the first answer under each key for this
	// long after the effect: long enough for the caller to give up, as when
	// the answer is lost on the way.
	LoseFirst time.Duration
	// Unavailable is how many POSTs the service answers 503 before it does
	// anything: the first ones, whatever their key.
	Unavailable int
	// Refuse, when set, decides a definitive refusal: a non-empty reason
	// answers 422 with it and does nothing, now or on any copy.
	Refuse func(request map[string]any) string

	mu      sync.Mutex
	effects map[string]*effect
	posts   int
}

type effect struct {
	request map[string]any
	answer  []byte
	// answered: an answer under its key went out (or was lost).
	answered bool
}

// Effects is how many effects the service made: the number a test counts.
func (s *Service) Effects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.effects)
}

// Posts is how many POSTs reached the service, copies, refusals and 503s
// included: what a caller that sends again and again would drive up.
func (s *Service) Posts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts
}

func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		s.mu.Lock()
		e, ok := s.effects[r.URL.Query().Get("idempotency_key")]
		s.mu.Unlock()
		if !ok {
			refuse(w, http.StatusNotFound, "no effect under this key")
			return
		}
		reply(w, http.StatusOK, e.answer)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		refuse(w, http.StatusMethodNotAllowed, "GET or POST")
		return
	}
	s.mu.Lock()
	s.posts++
	unavailable := s.Unavailable > 0
	if unavailable {
		s.Unavailable--
	}
	s.mu.Unlock()
	if unavailable {
		refuse(w, http.StatusServiceUnavailable, "busy; nothing was done")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	var request map[string]any
	if key == "" || json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&request) != nil || request == nil {
		refuse(w, http.StatusBadRequest, "an Idempotency-Key and a JSON object are required")
		return
	}
	if s.Refuse != nil {
		if reason := s.Refuse(request); reason != "" {
			refuse(w, http.StatusUnprocessableEntity, reason)
			return
		}
	}
	answer, lose, err := s.do(key, request)
	if err != nil {
		refuse(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if lose {
		select {
		case <-time.After(s.LoseFirst):
		case <-r.Context().Done():
		}
		return
	}
	reply(w, http.StatusCreated, answer)
}

// do makes the effect under key once, and returns its answer and whether
// this answer is the one to lose.
func (s *Service) do(key string, request map[string]any) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, seen := s.effects[key]
	if seen && !reflect.DeepEqual(e.request, request) {
		return nil, false, fmt.Errorf("idempotency key %q was used with another request", key)
	}
	if !seen {
		prefix := s.Prefix
		if prefix == "" {
			prefix = "fx_"
		}
		out := maps.Clone(request)
		out["id"], out["key"] = fmt.Sprintf("%s%d", prefix, len(s.effects)+1), key
		body, err := json.Marshal(out)
		if err != nil {
			return nil, false, err
		}
		e = &effect{request: request, answer: body}
		if s.effects == nil {
			s.effects = map[string]*effect{}
		}
		s.effects[key] = e // done
	}
	lose := s.LoseFirst > 0 && !e.answered
	e.answered = true
	return e.answer, lose, nil
}

func reply(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func refuse(w http.ResponseWriter, status int, reason string) {
	body, _ := json.Marshal(map[string]string{"error": reason})
	reply(w, status, body)
}
