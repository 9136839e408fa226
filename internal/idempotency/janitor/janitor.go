// Package janitor deletes expired idempotency records, and the tombstones
// kept past their time. Correctness never waits for it: every read already
// treats an expired record as absent. It only keeps the tables small.
// Several instances may purge at once: each batch deletes what is expired,
// and a row deleted by one is simply not found by the other. It is wired
// beside the core (internal/app starts it), and a fork that keeps its
// records forever can leave it out.
package janitor

import (
	"context"
	"log/slog"
	"time"
)

// Store is what the janitor needs of an idempotency store (gormstore's has
// both); the core's idempotency.Store leaves them out, as it never purges.
type Store interface {
	// PurgeExpired deletes up to limit records expired at now, the
	// longest expired first, leaving a tombstone for each if the store
	// keeps them, and returns how many it deleted.
	PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error)
	// PurgeTombstones deletes up to limit tombstones kept past their time.
	PurgeTombstones(ctx context.Context, now time.Time, limit int) (int, error)
}

// Config says how often and how much the janitor purges.
type Config struct {
	// Interval is the pause between two purges; default 1m.
	Interval time.Duration
	// Batch bounds the records one statement deletes; default 500.
	Batch int
	// OnPurge, if set, hears how many records each batch deleted.
	OnPurge func(n int)
	// Log hears a purge that failed; default slog.Default().
	Log *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Janitor purges a Store.
type Janitor struct {
	store Store
	cfg   Config
}

// New returns a janitor of store, cfg's zero fields set to their defaults.
func New(store Store, cfg Config) *Janitor {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Janitor{store: store, cfg: cfg}
}

// pause is the pause between two batches of one purge, so that a large
// backlog drains without monopolising the database.
const pause = 10 * time.Millisecond

// Run purges at once and then every Interval, until ctx ends.
func (j *Janitor) Run(ctx context.Context) {
	t := time.NewTicker(j.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := j.Purge(ctx); err != nil && ctx.Err() == nil {
			j.cfg.Log.WarnContext(ctx, "idempotency janitor: purge failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Purge deletes expired records in batches until a batch comes back short,
// then the tombstones kept past their time the same way, and returns how
// many records it deleted.
func (j *Janitor) Purge(ctx context.Context) (int, error) {
	total, err := j.drain(ctx, j.store.PurgeExpired, j.cfg.OnPurge)
	if err != nil {
		return total, err
	}
	_, err = j.drain(ctx, j.store.PurgeTombstones, nil)
	return total, err
}

// drain runs purge in batches until one comes back short.
func (j *Janitor) drain(ctx context.Context, purge func(context.Context, time.Time, int) (int, error), report func(int)) (int, error) {
	total := 0
	for {
		n, err := purge(ctx, j.cfg.Now(), j.cfg.Batch)
		total += n
		if n > 0 && report != nil {
			report(n)
		}
		if err != nil || n < j.cfg.Batch {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(pause):
		}
	}
}
