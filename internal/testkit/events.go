package testkit

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
)

// AuditEvents holds the outbox to the payments and refunds of the database
// at db (PostgreSQL when postgres, else SQLite): each holds exactly the
// events of the final state it reached (a payment succeeded, failed or
// canceled: one payment.<state>; a refund succeeded or canceled: one
// refund.<state>; one still on its way, or a failed refund: none), whoever
// moved it there: a request, the reconciler, a webhook or an operator's
// command. It returns one line per payment or refund that disagrees. The
// end-to-end tests and make chaos's audit run it.
func AuditEvents(ctx context.Context, db *sql.DB, postgres bool) ([]string, error) {
	id := `json_extract(payload, '$.id')`
	if postgres {
		id = `payload->>'id'`
	}
	events := map[string]map[string]int{} // by resource id, the count of each event type
	rows, err := db.QueryContext(ctx, `SELECT `+id+`, type FROM outbox_events WHERE type LIKE 'payment.%' OR type LIKE 'refund.%'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var rid, typ string
		if err := rows.Scan(&rid, &typ); err != nil {
			return nil, err
		}
		if events[rid] == nil {
			events[rid] = map[string]int{}
		}
		events[rid][typ]++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var problems []string
	for _, kind := range []struct {
		table, event string
		evented      map[string]bool
	}{
		{"payments", "payment", map[string]bool{"succeeded": true, "failed": true, "canceled": true}},
		{"refunds", "refund", map[string]bool{"succeeded": true, "canceled": true}},
	} {
		rows, err := db.QueryContext(ctx, `SELECT id, status FROM `+kind.table+` ORDER BY id`)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var rid, status string
			if err := rows.Scan(&rid, &status); err != nil {
				rows.Close()
				return nil, err
			}
			want := map[string]int{}
			if kind.evented[status] {
				want[kind.event+"."+status] = 1
			}
			got := events[rid]
			if got == nil {
				got = map[string]int{}
			}
			if !maps.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("%s %s is %s: the outbox holds %v, want %v", kind.event, rid, status, got, want))
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return problems, nil
}
