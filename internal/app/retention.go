package app

import (
	"context"
	"log/slog"
	"time"
)

// retention deletes what only grows and is no longer needed: published
// outbox events and webhook inbox rows older than EVENT_RETENTION. It
// works like the idempotency janitor: every interval, batches of at most
// batch rows, oldest first (an index each, migration 00012), with a pause
// between two batches so a backlog drains without holding the database.
// Several instances may run it at once: a row one deletes, the other no
// longer finds.
type retention struct {
	keep     time.Duration
	interval time.Duration
	batch    int
	pause    time.Duration
	now      func() time.Time
	log      *slog.Logger
	purges   []retentionPurge
}

// retentionPurge is one table's purge: delete at most limit rows older
// than before, return how many.
type retentionPurge struct {
	name  string
	purge func(ctx context.Context, before time.Time, limit int) (int, error)
}

// Batching of the purge, as the janitor's defaults.
const (
	retentionBatch = 500
	retentionPause = 10 * time.Millisecond
)

// run purges at once and then every interval, until ctx ends.
func (r *retention) run(ctx context.Context) {
	every(ctx, r.interval, true, func(ctx context.Context) { r.purgeOnce(ctx) })
}

// purgeOnce drains each table in batches until a batch comes back short,
// and returns how many rows it deleted from each.
func (r *retention) purgeOnce(ctx context.Context) map[string]int {
	deleted := map[string]int{}
	before := r.now().Add(-r.keep)
	for _, p := range r.purges {
		for {
			n, err := p.purge(ctx, before, r.batch)
			deleted[p.name] += n
			if err != nil {
				if ctx.Err() == nil {
					r.log.WarnContext(ctx, "retention: purge failed", "table", p.name, "error", err)
				}
				break
			}
			if n < r.batch {
				break
			}
			select {
			case <-ctx.Done():
				return deleted
			case <-time.After(r.pause):
			}
		}
		if deleted[p.name] > 0 {
			r.log.InfoContext(ctx, "retention: purged", "table", p.name, "rows", deleted[p.name], "older_than", before)
		}
	}
	return deleted
}
