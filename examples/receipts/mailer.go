package receipts

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Mailer is the outside service of this example: a mail API that, like a
// payment provider, deduplicates by Idempotency-Key, answers 503 before any
// effect (Unavailable), and can lose its answers (LoseFirst). It stands in
// for whatever service a fork calls; only its behaviour matters here.
//
//	POST /v1/messages {"to", "subject", "text"}  -> 201 {"id", "to", "key"},
//	                                                or 422 for a recipient it
//	                                                refuses (an address at
//	                                                the .invalid domain)
//	GET  /v1/messages?idempotency_key=K          -> 200 the message, or 404
type Mailer struct {
	// LoseFirst, when set, holds the first answer under each key for this
	// long after sending the mail: long enough for the caller to give up,
	// as when the answer is lost on the way.
	LoseFirst time.Duration
	// Unavailable, when set, is how many sends the Mailer answers 503
	// before it sends anything: the first ones, whatever their key.
	Unavailable int

	mu    sync.Mutex
	byKey map[string]Message
	lost  map[string]bool
}

// Message is a mail the Mailer sent.
type Message struct {
	ID  string `json:"id"`
	To  string `json:"to"`
	Key string `json:"key"`
	// Refused, on our side only, is why the mail service refused the mail
	// for good (a 4xx): nothing was sent.
	Refused string `json:"-"`
}

// Sent is how many mails the Mailer sent: the effect a test counts.
func (m *Mailer) Sent() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byKey)
}

func (m *Mailer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		m.mu.Lock()
		msg, ok := m.byKey[r.URL.Query().Get("idempotency_key")]
		m.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(msg)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	var in struct{ To string }
	if key == "" || json.NewDecoder(r.Body).Decode(&in) != nil || in.To == "" {
		http.Error(w, "a key and a recipient are required", http.StatusBadRequest)
		return
	}
	if strings.HasSuffix(in.To, ".invalid") {
		// A definitive refusal: nothing sent, now or on any retry.
		http.Error(w, "the recipient's domain does not exist", http.StatusUnprocessableEntity)
		return
	}
	m.mu.Lock()
	if m.Unavailable > 0 {
		// Busy: refused before any effect, as the 503 promises.
		m.Unavailable--
		m.mu.Unlock()
		http.Error(w, "the mail service is busy; nothing was sent", http.StatusServiceUnavailable)
		return
	}
	if m.byKey == nil {
		m.byKey, m.lost = map[string]Message{}, map[string]bool{}
	}
	msg, seen := m.byKey[key]
	if !seen {
		msg = Message{ID: fmt.Sprintf("msg_%d", len(m.byKey)+1), To: in.To, Key: key}
		m.byKey[key] = msg // sent
	}
	lose := m.LoseFirst > 0 && !m.lost[key]
	m.lost[key] = true
	m.mu.Unlock()
	if lose {
		select {
		case <-time.After(m.LoseFirst):
		case <-r.Context().Done():
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(msg)
}
