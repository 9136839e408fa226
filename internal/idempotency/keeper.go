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
}

// New returns a Keeper over store. Fields of cfg left at zero take their
// defaults (see Config).
func New(store Store, cfg Config) *Keeper {
	cfg = cfg.withDefaults()
	return &Keeper{store: store, cfg: cfg, now: cfg.Now, obs: cfg.Observer, flights: flights.New[flightID, Record]()}
}

// write runs a fenced record write that must finish whatever the client
// does. A failure other than ErrFenced (most likely the database away) is
// logged and handed to Config.Retry, if set, to try again in the
// background.
func (k *Keeper) write(ctx context.Context, what string, w func(ctx context.Context) error) error {
	wctx, cancel := k.writeContext(ctx)
	defer cancel()
	err := w(wctx)
	if err == nil || errors.Is(err, ErrFenced) {
		return err
	}
	k.cfg.Log.WarnContext(ctx, "idempotency: "+what+" failed", "error", err, "retried", k.cfg.Retry != nil)
	if k.cfg.Retry != nil {
		k.cfg.Retry(w)
	}
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

// inTx runs fn in a transaction of the Transactor (ctx's, if any).
func (k *Keeper) inTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return k.cfg.Transactor.InTx(ctx, fn)
}
