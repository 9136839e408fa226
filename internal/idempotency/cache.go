package idempotency

import "context"

// cached looks for a completed record of the request's key in this
// process's memory, then in the cache, if any, within Config.CacheTimeout. A
// miss and a cache error look alike: nil.
func (k *Keeper) cached(ctx context.Context, req keyedRequest) *Record {
	if rec := k.cfg.Memory.Get(req.Scope, req.Key, k.now()); rec != nil {
		return rec
	}
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

// published caches a record that has just been committed as completed and
// wakes its waiters everywhere. It runs after the answer is decided, off the
// request's path, and never fails the request.
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
