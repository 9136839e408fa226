package provider

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// placement is the ledger's answer to one create request.
type placement[T any] struct {
	object T
	// replayed: the key had already done exactly this; nothing new happened.
	replayed bool
	// hold is how long a fault keeps the caller waiting before the answer.
	hold time.Duration
	// event announces what happened, when something new did and webhooks
	// are on; the handler starts its delivery.
	event *pendingEvent
}

// handleCreateCharge serves POST /v1/charges.
func (s *Server) handleCreateCharge(w http.ResponseWriter, r *http.Request) {
	handleCreate(s, w, r, "the charge request is invalid", s.placeCharge)
}

// validatable is a request that can list its invalid fields.
type validatable interface {
	validate() []FieldError
}

// handleCreate is the shape both creating endpoints share. Checks run in
// the order a real PSP uses (key, body, ledger), so a malformed request
// never binds a key. The webhook goes out while a fault still holds the
// answer back: that is how a real caller learns the outcome of a lost
// response.
func handleCreate[Req validatable, Obj any](s *Server, w http.ResponseWriter, r *http.Request, invalid string,
	place func(key string, req Req) (placement[Obj], error)) {
	key, ok := idempotencyKey(w, r)
	if !ok {
		return
	}
	var req Req
	if !decodeBody(w, r, &req) {
		return
	}
	errs := req.validate()
	if c, ok := any(req).(ChargeRequest); ok && s.cfg.NoFaults && strings.HasPrefix(c.PaymentMethod, "pm_fault_") {
		errs = append(errs, FieldError{"payment_method", "the fault methods are off in this provider"})
	}
	if len(errs) > 0 {
		writeProblem(w, http.StatusBadRequest, CodeValidationFailed, invalid, errs...)
		return
	}
	placed, err := place(key, req)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	s.deliver(r.Context(), placed.event)
	s.holdAnswer(r.Context(), placed.hold)
	writeCreated(w, placed.replayed, placed.object)
}

// placeCharge takes the whole decision for one charge request under the
// lock, so that two requests with one key can never both charge.
func (s *Server) placeCharge(key string, req ChargeRequest) (placement[Charge], error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if prior, ok := s.ledger.keys[key]; ok {
		if prior.kind != "charge" || prior.request != any(req) {
			return placement[Charge]{}, errKeyReused
		}
		charge, _ := s.ledger.charges.get(prior.objectID)
		return placement[Charge]{object: charge, replayed: true}, nil
	}

	// Faults strike the first request under a key only; a retry under the
	// same key gets through, which is what makes retrying with one key a
	// cure rather than a gamble.
	first := s.ledger.firstSight(key)
	var hold time.Duration
	switch req.PaymentMethod {
	case MethodFaultUnavailable:
		if first {
			return placement[Charge]{}, errUnavailable
		}
	case MethodFaultLostResponse:
		if first {
			hold = s.cfg.LostResponseHold
		}
	case MethodFaultSlow:
		if first {
			hold = s.cfg.SlowDelay
		}
	default:
		if first {
			roll := s.rollChaosLocked()
			if roll.unavailable {
				return placement[Charge]{}, errUnavailable
			}
			hold = roll.hold
		}
	}

	charge := Charge{
		ID:             newID("ch"),
		Object:         "charge",
		Status:         ChargeSucceeded,
		Amount:         req.Amount,
		Currency:       req.Currency,
		PaymentMethod:  req.PaymentMethod,
		Reference:      req.Reference,
		IdempotencyKey: key,
		Created:        s.now().Unix(),
	}
	eventType := EventChargeSucceeded
	switch req.PaymentMethod {
	case MethodCardDeclined:
		charge.Status, charge.DeclineCode = ChargeDeclined, DeclineCardDeclined
		eventType = EventChargeDeclined
	case MethodCardInsufficientFunds:
		charge.Status, charge.DeclineCode = ChargeDeclined, DeclineInsufficientFunds
		eventType = EventChargeDeclined
	}
	s.ledger.addCharge(charge, req)
	s.log.Debug("charge made", "charge", charge.ID, "status", charge.Status, "reference", charge.Reference)

	return placement[Charge]{object: charge, hold: hold, event: s.newEventLocked(eventType, charge)}, nil
}

// chaosRoll is what Config.Chaos decided for one first request.
type chaosRoll struct {
	unavailable bool          // answer 503, do nothing
	hold        time.Duration // act, then keep the caller waiting this long
}

// rollChaosLocked draws from the random source in a fixed order, and only
// for the settings in use, so a seeded source gives the same faults to the
// same sequence of requests on every run.
func (s *Server) rollChaosLocked() chaosRoll {
	c := s.cfg.Chaos
	if c.UnavailableRate > 0 && s.rnd.Float64() < c.UnavailableRate {
		return chaosRoll{unavailable: true}
	}
	var roll chaosRoll
	if c.Latency > 0 {
		roll.hold = time.Duration(s.rnd.Int64N(int64(c.Latency) + 1))
	}
	if c.LostResponseRate > 0 && s.rnd.Float64() < c.LostResponseRate {
		roll.hold = s.cfg.LostResponseHold
	}
	return roll
}

// handleFindCharges serves GET /v1/charges?idempotency_key=K (one charge, or
// 404: how a reconciler settles an unknown outcome),
// GET /v1/charges?reference=R (a list, maybe empty: how a test proves that
// nothing was charged twice) and GET /v1/charges?created_after=T (every
// charge made after Unix time T, oldest first: how a sweep after a database
// failover finds the charges whose payment the database no longer holds).
func (s *Server) handleFindCharges(w http.ResponseWriter, r *http.Request) {
	serveFind(w, r, "charge", s.ChargeByKey, s.ChargesByReference, s.ChargesCreatedAfter)
}

// handleGetCharge serves GET /v1/charges/{id}.
func (s *Server) handleGetCharge(w http.ResponseWriter, r *http.Request) {
	serveGet(s, w, r, "charge", &s.ledger.charges)
}

// serveGet answers GET by id for charges and refunds alike.
func serveGet[T any](s *Server, w http.ResponseWriter, r *http.Request, noun string, t *table[T]) {
	s.mu.Lock()
	row, ok := t.get(r.PathValue("id"))
	s.mu.Unlock()
	if !ok {
		writeProblem(w, http.StatusNotFound, CodeNotFound, "no "+noun+" with this id")
		return
	}
	writeJSON(w, http.StatusOK, row)
}

// serveFind answers the three lookups that charges and refunds share.
func serveFind[T any](w http.ResponseWriter, r *http.Request, noun string,
	byKey func(string) (T, bool), byReference func(string) []T, createdAfter func(int64) []T,
) {
	q := r.URL.Query()
	given := 0
	for _, name := range []string{"idempotency_key", "reference", "created_after"} {
		if q.Has(name) {
			given++
		}
	}
	switch {
	case given > 1:
		writeProblem(w, http.StatusBadRequest, CodeValidationFailed,
			"give one of idempotency_key, reference or created_after")
	case q.Has("idempotency_key"):
		found, ok := byKey(q.Get("idempotency_key"))
		if !ok {
			writeProblem(w, http.StatusNotFound, CodeNotFound, "no "+noun+" was made under this idempotency key")
			return
		}
		writeJSON(w, http.StatusOK, found)
	case q.Has("reference"):
		writeJSON(w, http.StatusOK, List[T]{Object: "list", Data: byReference(q.Get("reference"))})
	case q.Has("created_after"):
		after, err := strconv.ParseInt(q.Get("created_after"), 10, 64)
		if err != nil || after < 0 {
			writeProblem(w, http.StatusBadRequest, CodeValidationFailed,
				"created_after must be a Unix time in seconds (a non-negative integer)",
				FieldError{Field: "created_after", Message: "must be a non-negative integer"})
			return
		}
		writeJSON(w, http.StatusOK, List[T]{Object: "list", Data: createdAfter(after)})
	default:
		writeProblem(w, http.StatusBadRequest, CodeValidationFailed,
			"give the query parameter idempotency_key, reference or created_after")
	}
}
