package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkeys/payments/internal/outbox"
	"github.com/idemkeys/payments/internal/provider"
)

// markOutbox notes where the outbox's Redis stream ends before the
// scenario, so that its audit reads only the events published since: the
// stream is shared by the run's scenarios.
func (f *failoverFigures) markOutbox(ctx context.Context, c *cluster) error {
	rdb := redis.NewClient(&redis.Options{Addr: c.sys.redis.Addr})
	defer func() { _ = rdb.Close() }()
	last, err := rdb.XRevRangeN(ctx, outbox.StreamKey, "+", "-", 1).Result()
	if err != nil {
		return fmt.Errorf("outbox stream: %w", err)
	}
	f.outboxFrom = "-"
	if len(last) == 1 {
		f.outboxFrom = "(" + last[0].ID // exclusive: what comes after it
	}
	return nil
}

// auditFailover waits for the system to settle on the new primary and then
// measures what the failover cost, by comparing every answer the clients
// got, the new primary's rows, the provider's ledger and the outbox stream:
//
//   - client-acknowledged operations lost: final answers (an order made, a
//     payment succeeded or declined, a refund made) whose resource the new
//     primary does not hold. Expected with asynchronous replication, a
//     finding with synchronous;
//   - net charges per order at the provider: succeeded charges for the
//     order's amount, less those refunded in full. More than one is a
//     double charge, whatever the database says: a finding;
//   - refunds made more than once for one client refund: a finding;
//   - the sweep: charges and refunds the provider made since the stall
//     (GET /v1/charges?created_after=…) whose reference, our payment or
//     refund id, the new primary does not hold; what an operator would be
//     shown after a failover;
//   - outbox events published again for one operation (the same type about
//     the same order), and the same event published twice;
//   - requests that failed from the stall on, and for how long writes were
//     unavailable.
//
// Operations are told apart by their order's amount (orderAmount), not by
// any id or key the API made: those are what a failover may lose.
func auditFailover(ctx context.Context, s *stage, within time.Duration) (auditResult, error) {
	f := s.failover
	c := s.c
	var res auditResult
	db, err := sql.Open("pgx", c.dbURL)
	if err != nil {
		return res, err
	}
	defer func() { _ = db.Close() }()
	// Records left executing are not waited for: after an asynchronous
	// failover some are the replicated start of a request whose end was
	// lost and whose client, answered before the loss, will not retry.
	res.settleTook, err = settle(ctx, db, within, `SELECT
		(SELECT count(*) FROM payments WHERE status IN ('pending', 'processing')) +
		(SELECT count(*) FROM refunds WHERE status IN ('pending', 'processing')) +
		(SELECT count(*) FROM outbox_events WHERE published_at IS NULL)`)
	if err != nil {
		return res, err
	}
	f.switchFigures()

	ids := map[string]map[string]string{} // table -> id -> status
	for _, table := range []string{"orders", "payments", "refunds"} {
		if ids[table], err = readStatuses(ctx, db, table); err != nil {
			return res, err
		}
	}
	var executing int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM idempotency_records WHERE state = 'executing'`).Scan(&executing); err != nil {
		return res, err
	}
	res.orders, res.payments, res.refunds = len(ids["orders"]), len(ids["payments"]), len(ids["refunds"])
	for table, byID := range ids {
		for id, status := range byID {
			switch {
			case table == "payments" && status == "succeeded":
				res.succeeded++
			case table == "payments" && status == "failed":
				res.declined++
			case table != "orders" && (status == "pending" || status == "processing"):
				res.stuck++
				res.violation("stuck: %s %s still %s after %s", strings.TrimSuffix(table, "s"), id, status, res.settleTook.Round(time.Millisecond))
			}
		}
	}
	f.executing = executing
	if executing > 0 && f.synchronous {
		res.stuck += executing
		res.violation("stuck: %d idempotency records still executing after %s", executing, res.settleTook.Round(time.Millisecond))
	}

	f.countLost(s.rec.answers(), ids)
	if f.synchronous && f.lost > 0 {
		res.violation("synchronous replication lost %d client-acknowledged operations (%s)", f.lost, describeCounts(f.lostByKind))
	}

	ledger, err := readLedger(ctx, c.providerURL())
	if err != nil {
		return res, err
	}
	res.charges = len(ledger.Charges)
	res.duplicates += f.countCharges(&res, ledger, s)

	// The sweep, as an operator would run it after promoting the standby:
	// everything the provider made since a moment before the loss, checked
	// against what the new primary holds.
	pc := provider.NewClient(c.providerURL(), provider.ClientOptions{})
	since := f.stalled.Add(-time.Second)
	charges, err := pc.ListChargesCreatedAfter(ctx, since)
	if err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	for _, ch := range charges {
		if _, ok := ids["payments"][ch.Reference]; !ok {
			f.sweptCharges++
		}
	}
	refunds, err := pc.ListRefundsCreatedAfter(ctx, since)
	if err != nil {
		return res, fmt.Errorf("sweep: %w", err)
	}
	for _, rf := range refunds {
		if _, ok := ids["refunds"][rf.Reference]; !ok {
			f.sweptRefunds++
		}
	}

	if err := f.countEvents(ctx, c, ledger); err != nil {
		return res, err
	}
	return res, nil
}

// countLost counts the operations whose client got a final answer naming a
// resource the new primary does not hold.
func (f *failoverFigures) countLost(answers map[string][]answer, ids map[string]map[string]string) {
	f.lostByKind = map[string]int{}
	for key, list := range answers {
		kind, _, _ := strings.Cut(key, "-")
		var table, id string
		for _, a := range list {
			switch {
			case kind == "order" && a.status == 201:
				table, id = "orders", a.id
			case kind == "pay" && a.status == 201:
				table, id = "payments", a.id
			case kind == "pay" && a.status == 402:
				table, id = "payments", a.paymentID
			case kind == "refund" && a.status == 201:
				table, id = "refunds", a.id
			default:
				continue
			}
			break // the first final answer; any later one is its replay
		}
		if id == "" {
			continue
		}
		f.acknowledged++
		if _, ok := ids[table][id]; !ok {
			f.lost++
			f.lostByKind[map[string]string{"orders": "order", "payments": "payment", "refunds": "refund"}[table]]++
		}
	}
}

// countCharges counts, per operation, the provider's succeeded charges not
// refunded in full and the refunds it made, records every operation with
// more than one of either as a finding, and returns how many are extra.
func (f *failoverFigures) countCharges(res *auditResult, ledger provider.Ledger, s *stage) int {
	refunded := map[string]int64{}
	chargeByID := map[string]provider.Charge{}
	for _, ch := range ledger.Charges {
		chargeByID[ch.ID] = ch
	}
	refundsByOp := map[int][]provider.Refund{}
	for _, rf := range ledger.Refunds {
		if rf.Status == provider.RefundSucceeded {
			refunded[rf.Charge] += rf.Amount
		}
		op := operationOf(chargeByID[rf.Charge].Amount)
		refundsByOp[op] = append(refundsByOp[op], rf)
	}
	chargesByOp := map[int][]provider.Charge{}
	for _, ch := range ledger.Charges {
		if ch.Status == provider.ChargeSucceeded && refunded[ch.ID] < ch.Amount {
			op := operationOf(ch.Amount)
			chargesByOp[op] = append(chargesByOp[op], ch)
		}
	}
	for _, list := range chargesByOp {
		f.maxNetCharges = max(f.maxNetCharges, len(list))
	}
	var extra int
	f.chargedTwice, extra = moreThanOnce(chargesByOp, func(ch provider.Charge) [3]string {
		return [3]string{ch.ID, ch.Reference, ch.IdempotencyKey}
	}, func(op int, n int, list string) {
		res.violation("double charge: the order of %s was charged %d times at the provider: %s", s.key("order", op), n, list)
	})
	var refundedExtra int
	f.refundedTwice, refundedExtra = moreThanOnce(refundsByOp, func(rf provider.Refund) [3]string {
		return [3]string{rf.ID, rf.Reference, rf.IdempotencyKey}
	}, func(op int, n int, list string) {
		res.violation("refunded twice: %s was refunded %d times at the provider: %s", s.key("refund", op), n, list)
	})
	extra += refundedExtra
	return extra
}

// moreThanOnce reports, through report, every operation of byOp with more
// than one row at the provider (each named by its id, reference and key),
// and returns how many operations and how many extra rows there are.
func moreThanOnce[T any](byOp map[int][]T, name func(T) [3]string, report func(op, n int, list string)) (ops, extra int) {
	for _, op := range sortedKeys(byOp) {
		list := byOp[op]
		if len(list) < 2 {
			continue
		}
		ops++
		extra += len(list) - 1
		parts := make([]string, len(list))
		for i, row := range list {
			n := name(row)
			parts[i] = fmt.Sprintf("%s (reference %s, provider key %s)", n[0], n[1], n[2])
		}
		report(op, len(list), strings.Join(parts, ", "))
	}
	return ops, extra
}

// countEvents reads the events published to the outbox stream since the
// scenario began and counts those published again about one operation
// (two order.created for one order's amount, two payment.succeeded for
// one order) and those published twice under one event id.
func (f *failoverFigures) countEvents(ctx context.Context, c *cluster, ledger provider.Ledger) error {
	rdb := redis.NewClient(&redis.Options{Addr: c.sys.redis.Addr})
	defer func() { _ = rdb.Close() }()
	entries, err := rdb.XRange(ctx, outbox.StreamKey, f.outboxFrom, "+").Result()
	if err != nil {
		return fmt.Errorf("outbox stream: %w", err)
	}
	// A refund event names its payment; the payment's charge (or its own
	// event) gives the amount, and so the operation.
	opOfPayment := map[string]int{}
	for _, ch := range ledger.Charges {
		opOfPayment[ch.Reference] = operationOf(ch.Amount)
	}
	type payload struct {
		ID          string `json:"id"`
		PaymentID   string `json:"payment_id"`
		Amount      int64  `json:"amount"`
		AmountTotal int64  `json:"amount_total"`
	}
	var events []struct {
		id, typ string
		p       payload
	}
	for _, e := range entries {
		typ, _ := e.Values[outbox.FieldType].(string)
		id, _ := e.Values[outbox.FieldEventID].(string)
		body, _ := e.Values[outbox.FieldPayload].(string)
		var p payload
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			return fmt.Errorf("outbox event %s: %w", id, err)
		}
		if strings.HasPrefix(typ, "payment.") {
			opOfPayment[p.ID] = operationOf(p.Amount)
		}
		events = append(events, struct {
			id, typ string
			p       payload
		}{id, typ, p})
	}
	perOp := map[string]int{}
	perID := map[string]int{}
	for _, e := range events {
		op := -1
		switch {
		case e.typ == "order.created":
			op = operationOf(e.p.AmountTotal)
		case strings.HasPrefix(e.typ, "payment."):
			op = operationOf(e.p.Amount)
		case strings.HasPrefix(e.typ, "refund."):
			if o, ok := opOfPayment[e.p.PaymentID]; ok {
				op = o
			}
		default:
			continue // customers: not the clients' operations
		}
		f.events++
		perID[e.id]++
		if perID[e.id] > 1 {
			f.eventsTwice++
		}
		if op >= 0 {
			k := e.typ + "/" + strconv.Itoa(op)
			perOp[k]++
			if perOp[k] > 1 {
				f.eventsAgain++
			}
		}
	}
	return nil
}

// readStatuses reads the id and status of every row of table.
func readStatuses(ctx context.Context, db *sql.DB, table string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT id, status FROM "+table) // table: one of the audit's own names
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	out := map[string]string{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			return nil, err
		}
		out[id] = status
	}
	return out, rows.Err()
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// describeCounts spells a count per kind, "2 payments, 1 refund".
func describeCounts(m map[string]int) string {
	var parts []string
	for _, k := range []string{"order", "payment", "refund"} {
		if m[k] > 0 {
			parts = append(parts, count(m[k], k))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
