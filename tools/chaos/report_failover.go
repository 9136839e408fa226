package main

import (
	"fmt"
	"io"
)

// failoverRows are the rows of the failover scenarios that ran.
func (r report) failoverRows() []row {
	var out []row
	for _, row := range r.rows {
		if row.failover != nil {
			out = append(out, row)
		}
	}
	return out
}

// writeFailover writes the failover section of docs/reliability.md: the
// table of what each replication mode cost, what the columns mean, and the
// recommendation the figures support.
func (r report) writeFailover(w io.Writer) {
	rows := r.failoverRows()
	if len(rows) == 0 {
		return
	}
	fmt.Fprint(w, `
## Failover: what losing the primary costs

The failover scenarios run the database as a primary and one streaming
standby, the instances' `+"`DATABASE_URL`"+` naming both
(`+"`postgres://…@primary,standby/payments?target_session_attrs=read-write&connect_timeout=5`"+`).
Under load the standby stops receiving the write-ahead log, then every
process of the primary is SIGKILLed (its machine is gone) and the standby is
promoted; the instances find it by themselves. The audit then compares every
answer the clients got, the new primary's rows, the provider's ledger and
the outbox stream.

| replication | operations | write-ahead log not on the standby at the kill | client-acknowledged operations lost | keys left executing | most net charges for one order (goal: 1) | orders charged more than once | refunds made twice | flagged by the sweep: charges, refunds | outbox events published again for one operation (same event twice) | requests failed during the switch | writes unavailable from the kill (from the promotion) | longest request |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
`)
	for _, row := range rows {
		f := row.failover
		mode := "asynchronous"
		if f.synchronous {
			mode = "synchronous"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d of %d (%s) | %d | %d | %d | %d | %d, %d | %d (%d) | %d | %.1f s (%.1f s) | %.1f s |\n",
			mode, thousands(f.ops), bytesText(f.walBehind), f.lost, f.acknowledged, describeCounts(f.lostByKind),
			f.executing, f.maxNetCharges, f.chargedTwice, f.refundedTwice, f.sweptCharges, f.sweptRefunds, f.eventsAgain, f.eventsTwice,
			f.failed, f.unavailable.Seconds(), f.reconnect.Seconds(), f.longest.Seconds())
	}
	fmt.Fprint(w, `
**Client-acknowledged operations lost**: final answers a client received (an
order made, a payment succeeded or declined, a refund made) whose order,
payment or refund the new primary does not hold. **Keys left executing**:
idempotency records the new primary holds as still executing, their end
lost, whose clients had their answer and will not retry; a retry under the
key would take the record over, and until then it waits for its expiry.
**Net charges** are an
order's succeeded charges at the provider, less those refunded in full (the
clients refund a part only, so a second charge stays visible); operations
are told apart by their order's amount, not by any id the API made, since
those are what a failover loses. **Refunds made twice**: a client's one
refund made more than once at the provider. **The sweep** lists what the
provider made since a second before the stall
(`+"`GET /v1/charges?created_after=…`"+`, the same for refunds) and flags what
the new primary has no payment or refund for: money moved for a row we
lost, which an operator settles. **Outbox events published again**: two
events of one type about one operation (a second `+"`order.created`"+` for a
re-created order, a second `+"`payment.succeeded`"+`), and in brackets one
event id published twice. **Requests failed**: attempts without an answer
or answered 5xx from the stall on; **writes unavailable** runs from the kill
to the first answer, to a request sent after it, that was not a failure,
and in brackets from the promotion to that answer (how long the instances
took to find the new primary; the time before is the failover manager's,
here a fixed `+r.profile.failoverDetect.String()+`).
`)
	r.writeRecommendation(w, rows)
}

// writeRecommendation says what the figures support, with the figures.
func (r report) writeRecommendation(w io.Writer, rows []row) {
	var async, sync *failoverFigures
	for _, row := range rows {
		if row.failover.synchronous {
			sync = row.failover
		} else {
			async = row.failover
		}
	}
	fmt.Fprint(w, "\n### Recommendation\n\n")
	if async != nil {
		fmt.Fprintf(w, "With asynchronous replication, a standby that had received nothing for %.1f s lost %d of the %d operations "+
			"whose clients had their final answer. ", async.killed.Sub(async.stalled).Seconds(), async.lost, async.acknowledged)
		if async.chargedTwice > 0 || async.refundedTwice > 0 {
			fmt.Fprintf(w, "Worse, retries after the loss charged %d orders a second time and refunded %d payments twice: "+
				"a retry found no trace of its key, and the provider did not take its request for the lost attempt's. ",
				async.chargedTwice, async.refundedTwice)
		} else {
			fmt.Fprint(w, "No order was charged twice and no refund made twice: the provider took each retry after the loss "+
				"for the lost attempt and replayed its answer. ")
		}
		fmt.Fprintf(w, "The sweep flagged %d charges and %d refunds the database no longer knew of.", async.sweptCharges, async.sweptRefunds)
	}
	if sync != nil {
		fmt.Fprintf(w, " With synchronous replication %d of %d acknowledged operations were lost and %d orders charged twice; "+
			"writes were unavailable for %.1f s from the kill (%.1f s from the promotion), and while the standby received nothing "+
			"commits waited instead of going ahead (the longest request took %.1f s).",
			sync.lost, sync.acknowledged, sync.chargedTwice, sync.unavailable.Seconds(), sync.reconnect.Seconds(), sync.longest.Seconds())
	}
	fmt.Fprint(w, `

So, for the payments database:

1. **Replicate synchronously**: `+"`synchronous_commit = on`"+` with
   `+"`synchronous_standby_names = 'ANY 1 (standby1, standby2)'`"+`: two standbys,
   so that losing one does not stop every commit, and a failover manager
   that promotes only a standby that was synchronous (Patroni's
   `+"`synchronous_mode`"+`). A commit then costs a round trip to a standby.
2. **Derive provider keys from the client's operation**, not from a new
   row's id, so that a retry after any loss sends the provider the key it
   has seen and gets the first charge back. With asynchronous replication
   this is what keeps a lost row from becoming a second charge; it cannot
   bring back what clients were told.
3. **Sweep after every failover**: list the provider's charges and refunds
   since the last moment the standby was known current and settle those
   whose reference the database lacks ([operations guide](guide/operations.md#failover)).
4. **Consumers of the outbox deduplicate by operation** (the order, payment
   or refund id and the event type), not by event id alone: a row lost and
   made again is published again under a new event id.
`)
}
