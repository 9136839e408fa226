package provider

import "net/http"

// ledger is the provider's memory: every charge and refund ever made, and
// what each idempotency key did. It has no lock of its own; Server.mu guards
// it, because a decision reads and writes several of its maps at once.
type ledger struct {
	charges table[Charge]
	refunds table[Refund]
	// keys binds each key that took effect to its request and result.
	keys map[string]keyRecord
	// seen holds every key that has had a first request, effect or not: a
	// fault strikes only the first request under a key, and a 503 binds
	// nothing, so this is kept apart from keys.
	seen map[string]bool
	// refunded is the sum of succeeded refunds per charge id.
	refunded map[string]int64
}

// keyRecord is what one idempotency key did.
type keyRecord struct {
	kind string // "charge" or "refund": one key serves one endpoint
	// request is the ChargeRequest or RefundRequest the key was bound to.
	// Both are comparable structs, so == tells a replay from a reuse.
	request  any
	objectID string
}

func newLedger() ledger {
	return ledger{
		charges:  newTable[Charge](),
		refunds:  newTable[Refund](),
		keys:     make(map[string]keyRecord),
		seen:     make(map[string]bool),
		refunded: make(map[string]int64),
	}
}

// firstSight records that key has been used and says whether this is the
// first time.
func (l *ledger) firstSight(key string) bool {
	if l.seen[key] {
		return false
	}
	l.seen[key] = true
	return true
}

func (l *ledger) addCharge(c Charge, req ChargeRequest) {
	l.charges.add(c.ID, c.Reference, c)
	l.keys[c.IdempotencyKey] = keyRecord{kind: "charge", request: req, objectID: c.ID}
}

func (l *ledger) addRefund(r Refund, req RefundRequest) {
	l.refunds.add(r.ID, r.Reference, r)
	l.keys[r.IdempotencyKey] = keyRecord{kind: "refund", request: req, objectID: r.ID}
	if r.Status == RefundSucceeded {
		l.refunded[r.Charge] += r.Amount
	}
}

func (l *ledger) chargeByKey(key string) (Charge, bool) {
	rec, ok := l.keys[key]
	if !ok || rec.kind != "charge" {
		return Charge{}, false
	}
	return l.charges.get(rec.objectID)
}

func (l *ledger) refundByKey(key string) (Refund, bool) {
	rec, ok := l.keys[key]
	if !ok || rec.kind != "refund" {
		return Refund{}, false
	}
	return l.refunds.get(rec.objectID)
}

// table is an append-only list of immutable objects, indexed by id and by
// the caller's reference.
type table[T any] struct {
	rows  []T
	byID  map[string]int
	byRef map[string][]int
}

func newTable[T any]() table[T] {
	return table[T]{byID: make(map[string]int), byRef: make(map[string][]int)}
}

func (t *table[T]) add(id, ref string, row T) {
	t.byID[id] = len(t.rows)
	t.byRef[ref] = append(t.byRef[ref], len(t.rows))
	t.rows = append(t.rows, row)
}

func (t *table[T]) get(id string) (T, bool) {
	i, ok := t.byID[id]
	if !ok {
		var zero T
		return zero, false
	}
	return t.rows[i], true
}

// withReference returns the rows with ref in the order they were made,
// never nil, so it encodes as an empty JSON list.
func (t *table[T]) withReference(ref string) []T {
	out := make([]T, 0, len(t.byRef[ref]))
	for _, i := range t.byRef[ref] {
		out = append(out, t.rows[i])
	}
	return out
}

// matching returns the rows for which keep holds, in the order they were
// made, never nil.
func (t *table[T]) matching(keep func(T) bool) []T {
	out := make([]T, 0)
	for _, row := range t.rows {
		if keep(row) {
			out = append(out, row)
		}
	}
	return out
}

// all returns every row, never nil, so it encodes as a JSON list.
func (t *table[T]) all() []T { return append(make([]T, 0, len(t.rows)), t.rows...) }

// Accessors for tests that want to look at the ledger directly. Tests should
// prefer the HTTP API, which is what the payments service sees.

// ChargesByReference returns every charge made with reference ref, oldest
// first. It is how a test proves that a payment was charged at most once.
func (s *Server) ChargesByReference(ref string) []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.charges.withReference(ref)
}

// ChargeByKey returns the charge made under idempotency key key, if any.
func (s *Server) ChargeByKey(key string) (Charge, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.chargeByKey(key)
}

// Charges returns every charge made, oldest first.
func (s *Server) Charges() []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.charges.all()
}

// ChargesCreatedAfter returns every charge made after Unix time after (in
// seconds), oldest first.
func (s *Server) ChargesCreatedAfter(after int64) []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.charges.matching(func(c Charge) bool { return c.Created > after })
}

// handleLedger serves GET /v1/ledger: the whole ledger at one moment.
func (s *Server) handleLedger(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	l := Ledger{Object: "ledger", Charges: s.ledger.charges.all(), Refunds: s.ledger.refunds.all()}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, l)
}

// RefundsByReference returns every refund made with reference ref, oldest
// first.
func (s *Server) RefundsByReference(ref string) []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.refunds.withReference(ref)
}

// RefundByKey returns the refund made under idempotency key key, if any.
func (s *Server) RefundByKey(key string) (Refund, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.refundByKey(key)
}

// RefundsCreatedAfter returns every refund made after Unix time after (in
// seconds), oldest first.
func (s *Server) RefundsCreatedAfter(after int64) []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.refunds.matching(func(r Refund) bool { return r.Created > after })
}

// Refunds returns every refund made, oldest first.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.refunds.all()
}
