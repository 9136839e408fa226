package idempotency

import "context"

// Lookup returns the live record of key in scope (GET
// /v1/idempotency-keys/{key}), or an error wrapping ErrKeyInvalid,
// ErrNotFound, or a store's error (seal's included).
func (k *Keeper) Lookup(ctx context.Context, scope, key string) (*Record, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	return k.store.Get(ctx, scope, key, k.now())
}
