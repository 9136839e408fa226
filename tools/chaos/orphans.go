package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idemkeys/payments/internal/provider"
)

// orphanAudit is what the provider holds that none of our operations asked
// for any more: a succeeded charge of a payment we consider canceled or
// failed (a late call landed after we gave the payment up), and a
// succeeded refund of a refund we consider canceled or failed. Issue 25
// has the API undo an orphan charge (a refund under a key derived from the
// charge) and flag an orphan refund; the audit counts both, and every one
// left unhandled (a charge not refunded in full, a refund not flagged in
// the API's orphans table) is a finding.
type orphanAudit struct {
	found     []string
	unhandled []string // one violation each
	refunded  map[string]int64
}

// undone reports whether ch is a charge the provider refunded in full: no
// longer money taken, whatever it was.
func (o orphanAudit) undone(ch provider.Charge) bool {
	return ch.Status == provider.ChargeSucceeded && o.refunded[ch.ID] >= ch.Amount
}

// findOrphans reads our refunds and holds them and our payments to the
// provider's ledger.
func findOrphans(ctx context.Context, db *sql.DB, ledger provider.Ledger, payments map[string]dbPayment) (orphanAudit, error) {
	o := orphanAudit{refunded: map[string]int64{}}
	for _, rf := range ledger.Refunds {
		if rf.Status == provider.RefundSucceeded {
			o.refunded[rf.Charge] += rf.Amount
		}
	}
	for _, ch := range ledger.Charges {
		p, ok := payments[ch.Reference]
		if !ok || ch.Status != provider.ChargeSucceeded || (p.status != "canceled" && p.status != "failed") {
			continue // a charge of no payment is a half-done finding of audit's own
		}
		o.found = append(o.found, ch.ID)
		if !o.undone(ch) {
			o.unhandled = append(o.unhandled, fmt.Sprintf("orphan charge: payment %s (key %s) is %s, but the provider holds its charge %s of %d %s, refunded %d",
				p.id, p.key, p.status, ch.ID, ch.Amount, ch.Currency, o.refunded[ch.ID]))
		}
	}

	flagged := map[string]bool{} // the provider's refunds the API flagged as orphans
	frows, err := db.QueryContext(ctx, `SELECT provider_id FROM orphans WHERE kind = 'refund' AND status IN ('flagged', 'resolved')`)
	if err != nil {
		return o, err
	}
	defer func() { _ = frows.Close() }()
	for frows.Next() {
		var id string
		if err := frows.Scan(&id); err != nil {
			return o, err
		}
		flagged[id] = true
	}
	if err := frows.Err(); err != nil {
		return o, err
	}

	ended := map[string]string{} // our refunds that are canceled or failed, by id
	rows, err := db.QueryContext(ctx, `SELECT id, status FROM refunds WHERE status IN ('canceled', 'failed')`)
	if err != nil {
		return o, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			return o, err
		}
		ended[id] = status
	}
	if err := rows.Err(); err != nil {
		return o, err
	}
	for _, rf := range ledger.Refunds {
		status, ok := ended[rf.Reference]
		if !ok || rf.Status != provider.RefundSucceeded {
			continue
		}
		o.found = append(o.found, rf.ID)
		if flagged[rf.ID] {
			continue // flagged for an operator (api flagged): handled
		}
		o.unhandled = append(o.unhandled, fmt.Sprintf("orphan refund: refund %s is %s, but the provider refunded it (%s, %d %s)",
			rf.Reference, status, rf.ID, rf.Amount, rf.Currency))
	}
	return o, nil
}
