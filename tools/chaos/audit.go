package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// auditOptions tunes the audit to its scenario.
type auditOptions struct {
	// settle bounds the wait for the reconciler, the webhooks and the
	// clients' last retries to leave nothing executing or unknown.
	settle time.Duration
	// allowedOrders raises, per key, how many orders it may have made (a
	// key sent again after it expired is a new key).
	allowedOrders map[string]int
	// expiring says records may have expired and been purged, so an order
	// without its record is not half-done.
	expiring bool
}

// auditResult is what an audit found.
type auditResult struct {
	orders, payments, succeeded, declined, charges, refunds int
	// duplicates: orders beyond one per key, payments beyond one per key,
	// charges beyond one per payment, succeeded charges beyond one per order,
	// and keys whose clients got two different final answers.
	duplicates int
	// stuck: idempotency records still executing, payments and refunds
	// still pending or processing, once the settle period is over.
	stuck      int
	settleTook time.Duration
	// violations describes every finding, duplicates and stuck records
	// included, one line each.
	violations []string

	// orphans: succeeded charges the provider holds for payments we
	// consider canceled or failed, and succeeded refunds of refunds we
	// consider canceled or failed (see orphans.go); unhandledOrphans,
	// those not undone, each a violation.
	orphans, unhandledOrphans int
}

func (r *auditResult) violation(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// Rows as the audit reads them.
type (
	dbOrder struct {
		id, status, key string
	}
	dbPayment struct {
		id, orderID, status, providerKey, chargeID, key string
	}
	dbRecord struct {
		key, path, state, recoveryPoint string
		status                          sql.NullInt64
		body                            []byte
		updated                         time.Time
	}
)

// audit waits for the scenario's system to settle and then compares its
// database, the provider's ledger and every answer in rec.
func audit(ctx context.Context, c *cluster, rec *recorder, o auditOptions) (auditResult, error) {
	var res auditResult
	db, err := sql.Open("pgx", c.dbURL)
	if err != nil {
		return res, err
	}
	defer func() { _ = db.Close() }()

	if res.settleTook, err = settle(ctx, db, o.settle, unsettled); err != nil {
		return res, err
	}

	orders, err := readOrders(ctx, db)
	if err != nil {
		return res, err
	}
	payments, err := readPayments(ctx, db)
	if err != nil {
		return res, err
	}
	records, err := readRecords(ctx, db)
	if err != nil {
		return res, err
	}
	// Every payment and refund holds exactly the events of the state it
	// ended in, whoever moved it there.
	eventProblems, err := testkit.AuditEvents(ctx, db, true)
	if err != nil {
		return res, err
	}
	for _, p := range eventProblems {
		res.violation("events: %s", p)
	}
	var unresolvedRefunds int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM refunds WHERE status IN ('pending', 'processing')`).Scan(&unresolvedRefunds); err != nil {
		return res, err
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM refunds`).Scan(&res.refunds); err != nil {
		return res, err
	}
	ledger, err := readLedger(ctx, c.providerURL())
	if err != nil {
		return res, err
	}
	res.orders, res.payments = len(orders), len(payments)

	// Orders: at most one per key (its allowance in the expiry scenario).
	ordersByKey := map[string][]dbOrder{}
	orderByID := map[string]dbOrder{}
	for _, ord := range orders {
		ordersByKey[ord.key] = append(ordersByKey[ord.key], ord)
		orderByID[ord.id] = ord
	}
	for key, list := range ordersByKey {
		allowed := max(1, o.allowedOrders[key])
		if len(list) > allowed {
			res.duplicates += len(list) - allowed
			res.violation("duplicate orders: key %s made %d orders (allowed %d)", key, len(list), allowed)
		}
	}

	// Payments: one per key, one succeeded per order; and the order's status
	// agrees with its payments.
	paymentsByKey := map[string][]dbPayment{}
	paymentByID := map[string]dbPayment{}
	succeededByOrder := map[string]int{}
	for _, p := range payments {
		paymentsByKey[p.key] = append(paymentsByKey[p.key], p)
		paymentByID[p.id] = p
		switch p.status {
		case "succeeded":
			succeededByOrder[p.orderID]++
			res.succeeded++
		case "failed":
			res.declined++
		case "pending", "processing":
			res.stuck++
			res.violation("stuck payment: %s (order %s, key %s) still %s after %s", p.id, p.orderID, p.key, p.status, res.settleTook.Round(time.Millisecond))
		}
	}
	for key, list := range paymentsByKey {
		if len(list) > 1 {
			res.duplicates += len(list) - 1
			res.violation("duplicate payments: key %s made %d payments", key, len(list))
		}
	}
	for orderID, n := range succeededByOrder {
		if n > 1 {
			res.duplicates += n - 1
			res.violation("order %s has %d succeeded payments", orderID, n)
		}
	}
	for _, ord := range orders {
		paid := succeededByOrder[ord.id] > 0
		if paid != (ord.status == "paid") {
			res.violation("half-done: order %s is %s but has %d succeeded payments", ord.id, ord.status, succeededByOrder[ord.id])
		}
	}
	if unresolvedRefunds > 0 {
		res.stuck += unresolvedRefunds
		res.violation("stuck refunds: %d still pending or processing", unresolvedRefunds)
	}

	// The provider's ledger: one charge per payment, none without one, and
	// each payment's final status is its charge's.
	chargesByRef := map[string][]provider.Charge{}
	for _, ch := range ledger.Charges {
		chargesByRef[ch.Reference] = append(chargesByRef[ch.Reference], ch)
	}
	res.charges = len(ledger.Charges)
	orphans, err := findOrphans(ctx, db, ledger, paymentByID)
	if err != nil {
		return res, err
	}
	res.orphans, res.unhandledOrphans = len(orphans.found), len(orphans.unhandled)
	res.violations = append(res.violations, orphans.unhandled...)
	chargedOrders := map[string]int{}
	for ref, list := range chargesByRef {
		p, ok := paymentByID[ref]
		if !ok {
			res.violation("half-done: the provider charged %d time(s) with reference %s, which is no payment", len(list), ref)
			continue
		}
		if len(list) > 1 {
			res.duplicates += len(list) - 1
			res.violation("duplicate charges: payment %s (key %s) was charged %d times", ref, p.key, len(list))
		}
		for _, ch := range list {
			if ch.Status == provider.ChargeSucceeded && !orphans.undone(ch) {
				chargedOrders[p.orderID]++
			}
			if ch.IdempotencyKey != p.providerKey {
				res.violation("charge %s of payment %s used provider key %s, not the payment's %s", ch.ID, ref, ch.IdempotencyKey, p.providerKey)
			}
		}
	}
	for orderID, n := range chargedOrders {
		if n > 1 {
			res.duplicates += n - 1
			res.violation("duplicate charges: order %s was charged successfully %d times", orderID, n)
		}
	}
	for _, p := range payments {
		list := chargesByRef[p.id]
		switch p.status {
		case "succeeded":
			if len(list) == 0 || list[0].Status != provider.ChargeSucceeded || list[0].ID != p.chargeID {
				res.violation("half-done: payment %s succeeded but the provider's charges for it are %s", p.id, describeCharges(list))
			}
		case "failed":
			if len(list) == 0 || list[0].Status != provider.ChargeDeclined {
				res.violation("half-done: payment %s failed but the provider's charges for it are %s", p.id, describeCharges(list))
			}
		case "canceled":
			// Its charges, if any, are orphans: findOrphans counts them, a
			// finding unless refunded in full.
		}
	}
	refundsByRef := map[string]int{}
	for _, rf := range ledger.Refunds {
		refundsByRef[rf.Reference]++
	}
	for ref, n := range refundsByRef {
		if n > 1 {
			res.duplicates += n - 1
			res.violation("duplicate refunds: refund %s was made %d times at the provider", ref, n)
		}
	}

	// Idempotency records: none executing; a completed one has its effect.
	answers := rec.answers()
	recordByKey := map[string]dbRecord{}
	for _, r := range records {
		recordByKey[r.key] = r
		if r.state == "executing" {
			res.stuck++
			res.violation("stuck record: key %s (%s) still executing at %q, last updated %s ago; its clients got: %s",
				r.key, r.path, r.recoveryPoint, time.Since(r.updated).Round(time.Millisecond), describeAnswers(answers[r.key]))
			continue
		}
		switch {
		case r.path == "/v1/orders":
			if len(ordersByKey[r.key]) == 0 {
				res.violation("half-done: key %s is completed (%d) but made no order", r.key, r.status.Int64)
			}
		case strings.HasSuffix(r.path, "/payments"):
			list := paymentsByKey[r.key]
			want := map[int64]string{201: "succeeded", 402: "failed"}[r.status.Int64]
			switch {
			case want != "" && (len(list) == 0 || list[0].status != want):
				res.violation("half-done: key %s answered %d but its payments are %v", r.key, r.status.Int64, list)
			case want == "" && len(list) > 0 && !o.expiring: // else it may be the payment of the key's earlier life
				res.violation("key %s answered %d but made payment %s (%s)", r.key, r.status.Int64, list[0].id, list[0].status)
			}
		}
	}
	if !o.expiring {
		for key := range ordersByKey {
			if _, ok := recordByKey[key]; !ok {
				res.violation("half-done: key %s made an order but has no idempotency record", key)
			}
		}
	}

	// Every answer any client received: no two different final answers per
	// key (and epoch), each agrees with the stored record and the database.
	for key, list := range answers {
		byEpoch := map[int][]answer{}
		for _, a := range list {
			byEpoch[a.epoch] = append(byEpoch[a.epoch], a)
		}
		for epoch, list := range byEpoch {
			var finals []answer
			for _, a := range list {
				if final(a) && (a.status < 400 || a.status == 402 || a.status == 409) {
					if !slices.ContainsFunc(finals, func(b answer) bool { return b.status == a.status && b.hash == a.hash }) {
						finals = append(finals, a)
					}
				}
			}
			if len(finals) > 1 {
				res.duplicates += len(finals) - 1
				res.violation("different final answers for key %s (epoch %d): %s", key, epoch, describeAnswers(finals))
			}
			if len(finals) == 0 {
				continue
			}
			a := finals[0]
			if r, ok := recordByKey[key]; ok && r.state == "completed" && !o.expiring {
				if int64(a.status) != r.status.Int64 || sha256.Sum256(r.body) != a.hash {
					res.violation("key %s: a client got %d but the stored answer is %d (or its body differs)", key, a.status, r.status.Int64)
				}
			}
			res.checkAnswer(key, list, ordersByKey, paymentsByKey, paymentByID, orderByID)
		}
	}
	return res, nil
}

// unsettled counts what the audit waits for: idempotency records still
// executing, payments and refunds whose outcome is not known yet.
const unsettled = `SELECT
	(SELECT count(*) FROM idempotency_records WHERE state = 'executing') +
	(SELECT count(*) FROM payments WHERE status IN ('pending', 'processing')) +
	(SELECT count(*) FROM refunds WHERE status IN ('pending', 'processing'))`

// settle polls, up to within, until query (a count, such as unsettled)
// finds nothing left, and returns how long it waited.
func settle(ctx context.Context, db *sql.DB, within time.Duration, query string) (time.Duration, error) {
	started := time.Now()
	for {
		var open int
		err := db.QueryRowContext(ctx, query).Scan(&open)
		if (err == nil && open == 0) || time.Since(started) > within {
			return time.Since(started), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(started), ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkAnswer compares the answers of one key with the database: an order
// answered is the key's order; a payment answered is the key's payment, in
// the status the answer said once the answer is final.
func (res *auditResult) checkAnswer(key string, list []answer, ordersByKey map[string][]dbOrder,
	paymentsByKey map[string][]dbPayment, paymentByID map[string]dbPayment, orderByID map[string]dbOrder,
) {
	for _, a := range list {
		switch {
		case a.status == 201 && strings.HasPrefix(a.id, "ord_"):
			if ord, ok := orderByID[a.id]; !ok || ord.key != key {
				res.violation("key %s was answered order %s, which the database does not hold for it", key, a.id)
			}
		case (a.status == 201 || a.status == 202) && strings.HasPrefix(a.id, "pay_"):
			p, ok := paymentByID[a.id]
			switch {
			case !ok || p.key != key:
				res.violation("key %s was answered payment %s, which the database does not hold for it", key, a.id)
			case a.status == 201 && (p.status != "succeeded" || a.resourceStatus != "succeeded"):
				res.violation("key %s was answered 201 %s for payment %s, which is %s", key, a.resourceStatus, a.id, p.status)
			}
		case a.status == 402:
			if p, ok := paymentByID[a.paymentID]; !ok || p.key != key || p.status != "failed" {
				res.violation("key %s was answered 402 for payment %q, which the database does not hold as failed for it", key, a.paymentID)
			}
		}
	}
}

func describeCharges(list []provider.Charge) string {
	if len(list) == 0 {
		return "none"
	}
	parts := make([]string, len(list))
	for i, ch := range list {
		parts[i] = ch.ID + " " + string(ch.Status)
	}
	return strings.Join(parts, ", ")
}

func describeAnswers(list []answer) string {
	if len(list) == 0 {
		return "no answer"
	}
	parts := make([]string, len(list))
	for i, a := range list {
		parts[i] = fmt.Sprintf("%d %s%s %s (body %x)", a.status, a.code, a.id, a.resourceStatus, a.hash[:6])
		if a.replayed {
			parts[i] += " replayed"
		}
	}
	return strings.Join(parts, "; ")
}

func readOrders(ctx context.Context, db *sql.DB) ([]dbOrder, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, status, coalesce(metadata->>'chaos_key', '') FROM orders`)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []dbOrder
	for rows.Next() {
		var o dbOrder
		if err := rows.Scan(&o.id, &o.status, &o.key); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

func readPayments(ctx context.Context, db *sql.DB) ([]dbPayment, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, order_id, status, provider_key, coalesce(provider_charge_id, ''), idempotency_key FROM payments`)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []dbPayment
	for rows.Next() {
		var p dbPayment
		if err := rows.Scan(&p.id, &p.orderID, &p.status, &p.providerKey, &p.chargeID, &p.key); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func readRecords(ctx context.Context, db *sql.DB) ([]dbRecord, error) {
	rows, err := db.QueryContext(ctx, `SELECT idempotency_key, path, state, recovery_point, response_status,
		coalesce(response_body, ''::bytea), updated_at FROM idempotency_records WHERE expires_at > now()`)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []dbRecord
	for rows.Next() {
		var r dbRecord
		if err := rows.Scan(&r.key, &r.path, &r.state, &r.recoveryPoint, &r.status, &r.body, &r.updated); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// readLedger fetches the provider's whole ledger (GET /v1/ledger).
func readLedger(ctx context.Context, baseURL string) (provider.Ledger, error) {
	var l provider.Ledger
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/v1/ledger", nil)
	if err != nil {
		return l, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return l, fmt.Errorf("provider ledger: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return l, fmt.Errorf("provider ledger: %s", resp.Status)
	}
	return l, json.NewDecoder(resp.Body).Decode(&l)
}
