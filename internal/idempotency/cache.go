package idempotency

import (
	"context"
	"time"
)

// Cache is an optional accelerator in front of the Store (RedisCache). The
// Store stays the source of truth: the cache holds only records that were
// already committed as completed, and only until they expire; any cache
// error makes the middleware fall back to the Store. So a cache that is down,
// slow or flushed costs speed, never correctness.
type Cache interface {
	// GetCompleted returns a cached completed record for the key. It
	// returns ErrNotFound on a miss; any other error means the cache could
	// not answer.
	GetCompleted(ctx context.Context, merchantID, key string) (*Record, error)
	// PutCompleted caches rec (completed, committed) until rec.ExpiresAt.
	PutCompleted(ctx context.Context, rec *Record) error
	// Notify tells every instance that the record of the key has changed
	// (completed or released), waking the duplicates that wait for it.
	Notify(ctx context.Context, merchantID, key string) error
	// Subscribe returns a channel that receives after a Notify for the
	// key, from any instance, and a function to stop listening. A cache
	// that cannot deliver simply never sends; waiters also poll.
	Subscribe(merchantID, key string) (<-chan struct{}, func())
}

// cacheTimeout bounds every cache call made in a request: a slow cache
// costs at most this before the Store answers instead.
const cacheTimeout = 150 * time.Millisecond

// cacheGet asks the cache, if any, for a completed record.
func (k *Keeper) cacheGet(ctx context.Context, req request) *Record {
	if k.cache == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, cacheTimeout)
	defer cancel()
	rec, err := k.cache.GetCompleted(ctx, req.merchantID, req.key)
	if err != nil {
		return nil
	}
	return rec
}

// published caches a record that has just been committed as completed and
// wakes its waiters everywhere. It runs after the answer is decided, off the
// request's path, and never fails the request.
func (k *Keeper) published(ctx context.Context, rec *Record) {
	if k.cache == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, cacheTimeout)
		defer cancel()
		if rec != nil && rec.State == StateCompleted && rec.Response != nil {
			_ = k.cache.PutCompleted(ctx, rec)
		}
		if rec != nil {
			_ = k.cache.Notify(ctx, rec.MerchantID, rec.Key)
		}
	}()
}

// released wakes the waiters of a key that was given back.
func (k *Keeper) released(ctx context.Context, merchantID, key string) {
	if k.cache == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, cacheTimeout)
		defer cancel()
		_ = k.cache.Notify(ctx, merchantID, key)
	}()
}
