package idempotency

import "context"

// cached looks for the key's completed record in the cache within
// CacheTimeout (memory was asked already, by request); a miss and a cache
// error alike are nil.
func (k *Keeper) cached(ctx context.Context, req keyedRequest) *Record {
	if k.cfg.Cache == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.CacheTimeout)
	defer cancel()
	rec, err := k.cfg.Cache.GetCompleted(ctx, req.Scope, req.Key)
	if err != nil {
		return nil
	}
	k.cfg.Memory.Put(rec)
	return rec
}

// published caches a record just committed as completed and wakes its
// waiters everywhere, off the request's path.
func (k *Keeper) published(rec *Record) {
	k.cfg.Memory.Put(rec)
	if k.cfg.Cache == nil || rec == nil {
		return
	}
	k.background(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, k.cfg.CacheTimeout)
		defer cancel()
		if rec.State == StateCompleted && rec.Answer != nil {
			_ = k.cfg.Cache.PutCompleted(ctx, rec)
		}
		_ = k.cfg.Cache.Notify(ctx, rec.Scope, rec.Key)
	})
}

// released wakes the waiters of a key that was given back.
func (k *Keeper) released(scope, key string) {
	if k.cfg.Cache == nil {
		return
	}
	k.background(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, k.cfg.CacheTimeout)
		defer cancel()
		_ = k.cfg.Cache.Notify(ctx, scope, key)
	})
}
