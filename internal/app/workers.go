package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

// every calls fn every interval until ctx ends, and once at the start too
// when atStart is set. The interval runs from one start to the next (a
// ticker): a round that overruns it is followed at once by the next.
func every(ctx context.Context, interval time.Duration, atStart bool, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	if atStart {
		fn(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn(ctx)
	}
}

// reconciler runs the keeper's reconciler (Keeper.Reconcile) every
// interval until ctx ends, logging a round that failed or settled calls.
func reconciler(keeper *idempotency.Keeper, interval time.Duration, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		every(ctx, interval, false, func(ctx context.Context) {
			if n, err := keeper.Reconcile(ctx); err != nil && ctx.Err() == nil {
				log.WarnContext(ctx, "reconciler: round failed", "error", err, "settled", n)
			} else if n > 0 {
				log.InfoContext(ctx, "reconciler: settled outside calls", "settled", n)
			}
		})
	}
}
