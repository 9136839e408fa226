package idempotency

import (
	"context"
	"sync"
	"time"
)

// The janitor deletes expired records. Correctness never waits for it:
// every read already treats an expired record as absent. It only keeps the
// table small. Several instances may purge at once: each batch deletes what
// is expired, and a row deleted by one is simply not found by the other.

// purgePause is the pause between two batches of one purge, so that a
// large backlog drains without monopolising the database.
const purgePause = 10 * time.Millisecond

// Run does the Keeper's background work until ctx ends: it purges expired
// records every PurgeInterval (and the tombstones kept past their time), and
// reconciles the outside calls of registered Effects every
// ReconcileInterval.
func (k *Keeper) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { k.every(ctx, k.cfg.PurgeInterval, true, k.purgeRound) })
	wg.Go(func() { k.every(ctx, k.cfg.ReconcileInterval, false, k.reconcileRound) })
	wg.Wait()
}

// every runs round every interval (at once first, if now) until ctx ends.
func (k *Keeper) every(ctx context.Context, interval time.Duration, now bool, round func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if now {
			round(ctx)
		}
		now = true
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (k *Keeper) purgeRound(ctx context.Context) {
	if _, err := k.purge(ctx); err != nil && ctx.Err() == nil {
		k.cfg.Log.WarnContext(ctx, "idempotency janitor: purge failed", "error", err)
	}
}

// purge deletes expired records in batches until a batch comes back short,
// then the tombstones kept past their time the same way, and returns how
// many records it deleted.
func (k *Keeper) purge(ctx context.Context) (int, error) {
	total, err := k.drain(ctx, k.store.PurgeExpired, k.cfg.OnPurge)
	if err != nil {
		return total, err
	}
	_, err = k.drain(ctx, k.store.PurgeTombstones, nil)
	return total, err
}

// drain runs purge in batches until one comes back short.
func (k *Keeper) drain(ctx context.Context, purge func(context.Context, time.Time, int) (int, error), report func(int)) (int, error) {
	total := 0
	for {
		n, err := purge(ctx, k.clock.Now(), k.cfg.PurgeBatch)
		total += n
		if n > 0 && report != nil {
			report(n)
		}
		if err != nil || n < k.cfg.PurgeBatch {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(purgePause):
		}
	}
}
