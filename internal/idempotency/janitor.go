package idempotency

import (
	"context"
	"log/slog"
	"time"
)

// JanitorConfig tunes the purge of expired records.
type JanitorConfig struct {
	// Interval between purge rounds.
	Interval time.Duration
	// BatchSize is how many records one statement deletes at most.
	BatchSize int
	// Pause between two batches of one round, so a large backlog drains
	// without monopolising the database.
	Pause time.Duration
}

// Janitor deletes expired records. Correctness never waits for it: every
// read already treats an expired record as absent. It only keeps the table
// small.
type Janitor struct {
	store Store
	clock Clock
	cfg   JanitorConfig
	log   *slog.Logger
	// OnPurge, if set, is told how many records each batch deleted, and
	// OnPurgeTombstones how many tombstones.
	OnPurge, OnPurgeTombstones func(n int)
}

// NewJanitor returns a Janitor; zero config fields take defaults (1 minute,
// 500 records, 10 ms).
func NewJanitor(store Store, clock Clock, cfg JanitorConfig, log *slog.Logger) *Janitor {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.Pause < 0 {
		cfg.Pause = 0
	} else if cfg.Pause == 0 {
		cfg.Pause = 10 * time.Millisecond
	}
	if log == nil {
		log = slog.Default()
	}
	return &Janitor{store: store, clock: clock, cfg: cfg, log: log}
}

// Run purges every Interval until ctx ends. Several instances may run it at
// once: each batch deletes what is expired, and a row deleted by one is
// simply not found by the other.
func (j *Janitor) Run(ctx context.Context) {
	t := time.NewTicker(j.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := j.PurgeOnce(ctx); err != nil && ctx.Err() == nil {
			j.log.WarnContext(ctx, "idempotency janitor: purge failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PurgeOnce deletes expired records in batches until a batch comes back
// short, then the tombstones kept past their time the same way, and
// returns how many records it deleted.
func (j *Janitor) PurgeOnce(ctx context.Context) (int, error) {
	total, err := j.drain(ctx, j.store.PurgeExpired, j.OnPurge)
	if err != nil {
		return total, err
	}
	_, err = j.drain(ctx, j.store.PurgeTombstones, j.OnPurgeTombstones)
	return total, err
}

// drain runs purge in batches until one comes back short.
func (j *Janitor) drain(ctx context.Context, purge func(context.Context, time.Time, int) (int, error), report func(int)) (int, error) {
	total := 0
	for {
		n, err := purge(ctx, j.clock.Now(), j.cfg.BatchSize)
		total += n
		if n > 0 && report != nil {
			report(n)
		}
		if err != nil || n < j.cfg.BatchSize {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(j.cfg.Pause):
		}
	}
}
