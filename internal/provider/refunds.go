package provider

import (
	"fmt"
	"net/http"
	"time"
)

// handleCreateRefund serves POST /v1/refunds, in the same order as charges.
func (s *Server) handleCreateRefund(w http.ResponseWriter, r *http.Request) {
	handleCreate(s, w, r, "the refund request is invalid", s.placeRefund)
}

// placeRefund takes the whole decision for one refund request under the
// lock, so concurrent refunds of one charge cannot together exceed it.
//
// A refund larger than what is left of the charge is made with status
// failed (code RefundFailureExceedsCharge), not rejected: it is then a final
// outcome bound to its key, replayed on retry and found by a lookup by key,
// like any other. Refunds have no fault payment methods; Config.Chaos
// applies to them as to ordinary charges.
func (s *Server) placeRefund(key string, req RefundRequest) (placement[Refund], error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if prior, ok := s.ledger.keys[key]; ok {
		if prior.kind != "refund" || prior.request != any(req) {
			return placement[Refund]{}, errKeyReused
		}
		refund, _ := s.ledger.refunds.get(prior.objectID)
		return placement[Refund]{object: refund, replayed: true}, nil
	}

	// An unknown or declined charge is the caller's mistake, answered
	// before anything else; like a validation error it binds no key.
	charge, ok := s.ledger.charges.get(req.Charge)
	if !ok {
		return placement[Refund]{}, fmt.Errorf("%w: %s", errChargeNotFound, req.Charge)
	}
	if charge.Status != ChargeSucceeded {
		return placement[Refund]{}, errChargeNotRefunded
	}

	var hold time.Duration
	if s.ledger.firstSight(key) {
		roll := s.rollChaosLocked()
		if roll.unavailable {
			return placement[Refund]{}, errUnavailable
		}
		hold = roll.hold
	}

	refund := Refund{
		ID:             newID("rf"),
		Object:         "refund",
		Status:         RefundSucceeded,
		Charge:         charge.ID,
		Amount:         req.Amount,
		Currency:       charge.Currency,
		Reference:      req.Reference,
		IdempotencyKey: key,
		Created:        s.now().Unix(),
	}
	if s.ledger.refunded[charge.ID]+req.Amount > charge.Amount {
		refund.Status, refund.FailureCode = RefundFailed, RefundFailureExceedsCharge
	}
	s.ledger.addRefund(refund, req)
	s.log.Debug("refund made", "refund", refund.ID, "status", refund.Status, "reference", refund.Reference)

	var event *pendingEvent
	if refund.Status == RefundSucceeded {
		event = s.newEventLocked(EventRefundSucceeded, refund)
	}
	return placement[Refund]{object: refund, hold: hold, event: event}, nil
}

// handleFindRefunds serves GET /v1/refunds?idempotency_key=K,
// GET /v1/refunds?reference=R and GET /v1/refunds?created_after=T, like
// charges.
func (s *Server) handleFindRefunds(w http.ResponseWriter, r *http.Request) {
	serveFind(w, r, "refund", s.RefundByKey, s.RefundsByReference, s.RefundsCreatedAfter)
}

// handleGetRefund serves GET /v1/refunds/{id}.
func (s *Server) handleGetRefund(w http.ResponseWriter, r *http.Request) {
	serveGet(s, w, r, "refund", &s.ledger.refunds)
}
