package idempotency

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemkeys/payments/internal/flights"
)

// Keeper is the idempotency layer, free of any HTTP framework or database
// library: an adapter (ginidem) turns a request into an Input, calls Atomic
// or Guarded, and writes the answer; a Store (gormstore) keeps the records.
type Keeper struct {
	store   Store
	cfg     Config
	now     func() time.Time
	obs     Observer
	flights *flights.Group[flightID, Record]
	kinds   sync.Map // the registered Effects by Kind (settler)

	// Retried record writes run in the background under bg until Close,
	// counted in work.
	bg     context.Context
	stopBG context.CancelFunc
	work   sync.WaitGroup
}

// New returns a Keeper over store. Fields of cfg left at zero take their
// defaults (see Config).
func New(store Store, cfg Config) *Keeper {
	cfg = cfg.withDefaults()
	bg, stop := context.WithCancel(context.Background())
	return &Keeper{
		store: store, cfg: cfg, now: cfg.Now, obs: cfg.Observer, flights: flights.New[flightID, Record](),
		bg: bg, stopBG: stop,
	}
}

// Close waits for the Keeper's background work to end, up to ctx, then
// stops it (a record write stopped so leaves its record to the lock
// timeout, as a crash would) and returns ctx's error.
func (k *Keeper) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		k.work.Wait()
		close(done)
	}()
	select {
	case <-done:
		k.stopBG()
		return nil
	case <-ctx.Done():
		k.stopBG()
		<-done
		return ctx.Err()
	}
}

// background runs fn off the request's path, under the Keeper's own
// context, so that Close can wait for it.
func (k *Keeper) background(fn func(ctx context.Context)) {
	k.work.Add(1)
	go func() {
		defer k.work.Done()
		fn(k.bg)
	}()
}

// write runs a fenced record write that must finish whatever the client
// does. A failure other than ErrFenced (most likely the database away) is
// logged and the write retried in the background with a growing pause,
// until it succeeds, is fenced out, or the lock it protects runs out.
func (k *Keeper) write(ctx context.Context, what string, w func(ctx context.Context) error) error {
	wctx, cancel := k.writeContext(ctx)
	defer cancel()
	err := w(wctx)
	if err == nil || errors.Is(err, ErrFenced) {
		return err
	}
	k.cfg.Log.WarnContext(ctx, "idempotency: "+what+" failed; retrying in the background", "error", err)
	k.background(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, k.cfg.LockTimeout)
		defer cancel()
		for pause := k.cfg.RetryMin; ; pause = min(pause*2, k.cfg.RetryMax) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			if err := w(ctx); err == nil || errors.Is(err, ErrFenced) {
				return
			}
		}
	})
	return err
}

// writeContext is that of a record write that must finish whatever the
// client does: not cancelled by a disconnect, bounded by writeTimeout.
func (k *Keeper) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
}

// published keeps a record just committed as completed and wakes its
// waiters everywhere.
func (k *Keeper) published(rec *Record) {
	k.cfg.Cache.Keep(rec)
	k.cfg.Cache.Changed(rec.Scope, rec.Key)
}

func (k *Keeper) inProgress() error {
	return retryable(ErrInProgress, retryAfter)
}

// inTx runs fn in a transaction of the Transactor (ctx's, if any).
func (k *Keeper) inTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return k.cfg.Transactor.InTx(ctx, fn)
}
