package explore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/explore"
)

// The shop is the application the scenarios run: payments and refunds
// through the outside service, each an idempotency.Effect, and orders made
// by Atomic requests. Its rules are the payments domain's, cut to what the
// protocol touches, and nothing in it guards against a second payment or
// refund of one operation (no unique index of one active payment per
// order): only the core does. A fork copies this file and puts its own
// Effect in place of these two.

type payment struct {
	Scope, ID string
	Amount    int64
	Decline   bool
	Status    string // pending, processing, succeeded, failed, canceled
	Refunded  int64
}

type refund struct {
	Scope, ID, Payment string
	Amount             int64
	Status             string
	// Undoes is, for a refund the system started for an orphan charge, the
	// charge's key; empty for a client's refund.
	Undoes string
}

type order struct {
	Scope, ID, Key string
}

// The application's refusals, and how each is answered (the error table).
var (
	errExceeds    = errors.New("refund_exceeds_payment")
	errInProgress = errors.New("payment_in_progress")
)

const scope = "acme"

type shop struct {
	w        *explore.World
	payments *explore.Rows[payment]
	refunds  *explore.Rows[refund]
	orders   *explore.Rows[order]
	a, b     *instance
	orderN   int
	// orphanID is the payment the orphan scenario seeds.
	orphanID string
}

// instance is one API instance: a Keeper with the shop's Effects.
type instance struct {
	name string
	k    *idempotency.Keeper
	pay  *idempotency.Effect[payment, explore.Op]
	ref  *idempotency.Effect[refund, explore.Op]
}

func newShop(w *explore.World) *shop {
	s := &shop{
		w: w, payments: explore.NewRows[payment](w.Store, "payments"),
		refunds: explore.NewRows[refund](w.Store, "refunds"), orders: explore.NewRows[order](w.Store, "orders"),
	}
	s.a, s.b = s.instance("a", w.Config()), s.instance("b", w.Config())
	return s
}

func (s *shop) instance(name string, cfg idempotency.Config) *instance {
	in := &instance{name: name, k: s.w.Keeper(cfg)}
	in.ref = idempotency.Register(in.k, idempotency.Effect[refund, explore.Op]{
		Kind: "refund", Prefix: "re_",
		Load: s.refunds.Get,
		Send: func(ctx context.Context, r refund, key string) (explore.Op, error) {
			target := r.Undoes
			if target == "" {
				p, err := s.payments.Get(ctx, r.Scope, r.Payment)
				if err != nil {
					return explore.Op{}, fmt.Errorf("%w: %w", idempotency.ErrNotExecuted, err)
				}
				target = p.ID
			}
			return s.send(ctx, explore.Request{Kind: "refund", Key: key, Ref: r.ID, Target: target, Amount: r.Amount})
		},
		Find: func(ctx context.Context, _ refund, key string) (explore.Op, error) {
			return s.w.Outside.Find(ctx, key)
		},
		Check: func(r refund, op explore.Op) error { return check(op, "refund", r.ID, r.Amount) },
		Settle: func(ctx context.Context, r refund, op explore.Op) (refund, error) {
			if final(r.Status) {
				return r, nil
			}
			r.Status = "failed"
			if op.OK {
				r.Status = "succeeded"
				if r.Undoes == "" {
					p, err := s.payments.Get(ctx, r.Scope, r.Payment)
					if err != nil {
						return r, err
					}
					p.Refunded += r.Amount
					if err := s.payments.Update(ctx, p.Scope, p.ID, p); err != nil {
						return r, err
					}
				}
			}
			return r, s.refunds.Update(ctx, r.Scope, r.ID, r)
		},
		Unknown: func(ctx context.Context, r refund) (refund, error) { return s.moveRefund(ctx, r, "processing") },
		Cancel:  func(ctx context.Context, r refund) (refund, error) { return s.moveRefund(ctx, r, "canceled") },
		Answer: func(r refund) idempotency.Answer {
			return answerOf(r.ID, r.Status, map[string]int{"succeeded": 201, "failed": 201, "canceled": 409})
		},
		Orphan: func(_ context.Context, r refund, op explore.Op) (bool, error) {
			// Money we returned for a refund we consider over: nothing to
			// undo it with; an operator's (counted by the invariants).
			return op.OK && r.Status == "canceled", nil
		},
	})
	in.pay = idempotency.Register(in.k, idempotency.Effect[payment, explore.Op]{
		Kind: "payment", Prefix: "pay_",
		Load: s.payments.Get,
		Send: func(ctx context.Context, p payment, key string) (explore.Op, error) {
			return s.send(ctx, explore.Request{Kind: "charge", Key: key, Ref: p.ID, Amount: p.Amount, Decline: p.Decline})
		},
		Find: func(ctx context.Context, _ payment, key string) (explore.Op, error) {
			return s.w.Outside.Find(ctx, key)
		},
		Check: func(p payment, op explore.Op) error { return check(op, "charge", p.ID, p.Amount) },
		Settle: func(ctx context.Context, p payment, op explore.Op) (payment, error) {
			if final(p.Status) {
				return p, nil
			}
			p.Status = "failed"
			if op.OK {
				p.Status = "succeeded"
			}
			return p, s.payments.Update(ctx, p.Scope, p.ID, p)
		},
		Unknown: func(ctx context.Context, p payment) (payment, error) { return s.movePayment(ctx, p, "processing") },
		Cancel:  func(ctx context.Context, p payment) (payment, error) { return s.movePayment(ctx, p, "canceled") },
		Answer: func(p payment) idempotency.Answer {
			return answerOf(p.ID, p.Status, map[string]int{"succeeded": 201, "failed": 402, "canceled": 409})
		},
		Orphan: func(ctx context.Context, p payment, op explore.Op) (bool, error) {
			if !op.OK || (p.Status != "canceled" && p.Status != "failed") {
				return false, nil
			}
			// A charge for a payment that is over: refunded automatically,
			// as a call the system starts itself, keyed by the charge.
			_, _, err := in.ref.Start(ctx, p.Scope, op.Key, func(ctx context.Context, c idempotency.Call) (refund, error) {
				r := refund{Scope: p.Scope, ID: c.ID, Payment: p.ID, Amount: op.Amount, Status: "pending", Undoes: op.Key}
				return r, s.refunds.Insert(ctx, r.Scope, r.ID, r)
			})
			return true, err
		},
	})
	return in
}

func (s *shop) send(ctx context.Context, req explore.Request) (explore.Op, error) {
	return s.w.Outside.Do(ctx, req)
}

// announce delivers a webhook for every call the outside service executes:
// the news, asked again of the outside service as the API does, applied on
// instance a.
func (s *shop) announce(op explore.Op) {
	s.w.Spawn("webhook "+op.Kind+" "+op.Key[len(op.Key)-4:], func(ctx context.Context) {
		got, err := s.w.Outside.Find(ctx, op.Key)
		if err != nil {
			return
		}
		if op.Kind == "charge" {
			_, _, _ = s.a.pay.Apply(ctx, scope, op.Ref, got)
		} else {
			_, _, _ = s.a.ref.Apply(ctx, scope, op.Ref, got)
		}
	})
}

func check(op explore.Op, kind, id string, amount int64) error {
	if op.Kind != kind || op.Ref != id || op.Amount != amount {
		return fmt.Errorf("%w: %s %s of %d, not %s %s of %d", idempotency.ErrMismatch, op.Kind, op.Ref, op.Amount, kind, id, amount)
	}
	return nil
}

func final(status string) bool {
	return status == "succeeded" || status == "failed" || status == "canceled"
}

// movePayment moves a pending or processing payment to status; a final
// one stays as it is.
func (s *shop) movePayment(ctx context.Context, p payment, status string) (payment, error) {
	if final(p.Status) {
		return p, nil
	}
	p.Status = status
	return p, s.payments.Update(ctx, p.Scope, p.ID, p)
}

// moveRefund is movePayment for a refund.
func (s *shop) moveRefund(ctx context.Context, r refund, status string) (refund, error) {
	if final(r.Status) {
		return r, nil
	}
	r.Status = status
	return r, s.refunds.Update(ctx, r.Scope, r.ID, r)
}

func answerOf(id, status string, codes map[string]int) idempotency.Answer {
	code, ok := codes[status]
	if !ok {
		code = 202
	}
	return idempotency.Answer{Status: code, Header: http.Header{"Content-Type": {"application/json"}},
		Body: fmt.Appendf(nil, `{"id":%q,"status":%q}`, id, status), Final: ok}
}

// refusal answers an error of a Guarded handler, as the API's error table
// does: only a business conflict is final.
func (s *shop) refusal(id string, err error) idempotency.Answer {
	body := func(code string) []byte { return fmt.Appendf(nil, `{"code":%q,"id":%q}`, code, id) }
	switch {
	case errors.Is(err, idempotency.ErrNotExecuted):
		// 502: nothing was done. The outside service must agree, now.
		if executed, onItsWay := s.w.Outside.Executed(id); executed || onItsWay {
			s.w.Fail("not-executed: answered 502 for %s, which the outside service executed (%t) or has on its way (%t)", id, executed, onItsWay)
		}
		return idempotency.Answer{Status: 502, Body: body("provider_unavailable")}
	case errors.Is(err, errExceeds):
		return idempotency.Answer{Status: 409, Body: body("refund_exceeds_payment"), Final: true}
	case errors.Is(err, errInProgress), errors.Is(err, idempotency.ErrFenced):
		return idempotency.Answer{Status: 409, Body: body("in_progress")}
	}
	return idempotency.Answer{Status: 500, Body: body("internal_error")}
}

// pay is a client's payment of amount under key, sent to in.
func (s *shop) pay(ctx context.Context, in *instance, key string, amount int64, decline bool) explore.Answered {
	body := fmt.Sprintf(`{"amount":%d,"decline":%t}`, amount, decline)
	return s.w.Guarded(ctx, in.k, input(key, "/orders/ord_1/payments", body),
		func(ctx context.Context, op *idempotency.Op, _ []byte) idempotency.Answer {
			p, err := in.pay.Run(ctx, op, func(ctx context.Context, c idempotency.Call) (payment, error) {
				p := payment{Scope: c.Scope, ID: c.ID, Amount: amount, Decline: decline, Status: "pending"}
				return p, s.payments.Insert(ctx, p.Scope, p.ID, p)
			})
			if err != nil {
				return s.refusal(p.ID, err)
			}
			return in.pay.Answer(p)
		})
}

// refund is a client's refund of amount (all that is left when 0) of the
// payment paymentID under key, sent to in.
func (s *shop) refund(ctx context.Context, in *instance, key, paymentID string, amount int64) explore.Answered {
	body := fmt.Sprintf(`{"amount":%d}`, amount)
	return s.w.Guarded(ctx, in.k, input(key, "/payments/"+paymentID+"/refunds", body),
		func(ctx context.Context, op *idempotency.Op, _ []byte) idempotency.Answer {
			r, err := in.ref.Run(ctx, op, func(ctx context.Context, c idempotency.Call) (refund, error) {
				return s.createRefund(ctx, c, paymentID, amount)
			})
			if err != nil {
				return s.refusal(r.ID, err)
			}
			return in.ref.Answer(r)
		})
}

// createRefund reserves amount of the payment in phase 1's transaction:
// the refunds not failed or canceled, and this one, never exceed it.
func (s *shop) createRefund(ctx context.Context, c idempotency.Call, paymentID string, amount int64) (refund, error) {
	p, err := s.payments.Get(ctx, c.Scope, paymentID)
	if err != nil {
		return refund{}, err
	}
	switch p.Status {
	case "succeeded":
	case "pending", "processing":
		return refund{}, errInProgress
	default:
		return refund{}, errExceeds
	}
	taken, err := s.refunds.Where(ctx, func(r refund) bool {
		return r.Payment == paymentID && r.Undoes == "" && r.Status != "failed" && r.Status != "canceled"
	})
	if err != nil {
		return refund{}, err
	}
	left := p.Amount
	for _, r := range taken {
		left -= r.Amount
	}
	if amount == 0 {
		amount = left
	}
	if amount <= 0 || amount > left {
		return refund{}, errExceeds
	}
	r := refund{Scope: c.Scope, ID: c.ID, Payment: paymentID, Amount: amount, Status: "pending"}
	return r, s.refunds.Insert(ctx, r.Scope, r.ID, r)
}

// createOrder is a client's Atomic order under key, sent to in.
func (s *shop) createOrder(ctx context.Context, in *instance, key string) explore.Answered {
	return s.w.Atomic(ctx, in.k, input(key, "/orders", `{"items":1}`),
		func(ctx context.Context, _ []byte) idempotency.Answer {
			s.orderN++
			o := order{Scope: scope, ID: fmt.Sprintf("ord_%d", s.orderN), Key: key}
			if err := s.orders.Insert(ctx, o.Scope, o.ID, o); err != nil {
				return idempotency.Answer{Status: 500, Body: []byte(err.Error())}
			}
			return idempotency.Answer{Status: 201, Header: http.Header{"Content-Type": {"application/json"}},
				Body: fmt.Appendf(nil, `{"id":%q}`, o.ID), Final: true}
		})
}

func input(key, path, body string) idempotency.Input {
	return idempotency.Input{Scope: scope, Keys: []string{key}, Method: "POST", Path: path, Route: path, Body: strings.NewReader(body)}
}

// paid seeds a succeeded payment of amount, its charge executed: what the
// refund scenarios start from.
func (s *shop) paid(id string, amount int64) {
	ctx := context.Background()
	s.w.Outside.Send(explore.Request{Kind: "charge", Key: id, Ref: id, Amount: amount})
	_ = s.payments.Insert(ctx, scope, id, payment{Scope: scope, ID: id, Amount: amount, Status: "succeeded"})
}

// checkMoney holds the shop's rows to the outside service's ledger at rest:
// the money we show is the money that moved.
func (s *shop) checkMoney() []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	ops := map[string]explore.Op{}
	undone := map[string]int{} // orphan charges' automatic refunds, by charge key
	refunded := map[string]int64{}
	for _, op := range s.w.Outside.Ledger() {
		ops[op.Key] = op
	}
	refundRows := map[string]refund{}
	for _, r := range s.refunds.All() {
		refundRows[r.ID] = r
	}
	for _, op := range s.w.Outside.Ledger() {
		if op.Kind != "refund" || !op.OK {
			continue
		}
		if r, ok := refundRows[op.Ref]; ok && r.Undoes != "" {
			undone[r.Undoes]++
		} else {
			refunded[op.Target] += op.Amount
		}
	}
	for _, p := range s.payments.All() {
		op, charged := ops[p.ID]
		switch {
		case p.Status == "succeeded" && (!charged || !op.OK):
			fail("money: payment %s succeeded, but the outside service holds no charge for it", p.ID)
		case p.Status == "failed" && charged && op.OK && undone[p.ID] != 1:
			fail("money: payment %s failed, its charge succeeded, and it was refunded %d times", p.ID, undone[p.ID])
		case p.Status == "canceled" && charged && op.OK && undone[p.ID] != 1:
			fail("money: payment %s canceled, its charge succeeded, and it was refunded %d times", p.ID, undone[p.ID])
		case p.Status == "pending" || p.Status == "processing":
			fail("money: payment %s is still %s at rest", p.ID, p.Status)
		}
		if p.Refunded != refunded[p.ID] {
			fail("money: payment %s shows %d refunded, the outside service refunded %d", p.ID, p.Refunded, refunded[p.ID])
		}
		if p.Refunded > p.Amount {
			fail("money: payment %s of %d refunded %d", p.ID, p.Amount, p.Refunded)
		}
	}
	for _, r := range s.refunds.All() {
		op, sent := ops[r.ID]
		switch {
		case r.Status == "succeeded" && (!sent || !op.OK):
			fail("money: refund %s succeeded, but the outside service holds no refund for it", r.ID)
		case r.Status == "canceled" && sent && op.OK:
			fail("money: refund %s canceled, but the outside service refunded it", r.ID)
		case !final(r.Status):
			fail("money: refund %s is still %s at rest", r.ID, r.Status)
		}
	}
	orders := map[string]int{}
	for _, o := range s.orders.All() {
		orders[o.Key]++
	}
	for key, n := range orders {
		if lives := s.w.Store.Lifetime(scope, key); n > max(lives, 1) {
			fail("one-effect: %d orders under key %s, which had %d records", n, key, lives)
		}
	}
	return problems
}
