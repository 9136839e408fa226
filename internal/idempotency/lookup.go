package idempotency

import "context"

// Lookup returns the live record of key in scope, for the key introspection
// endpoint (GET /v1/idempotency-keys/{key}). Keys are scoped, so another
// scope's record under the same key is not found. It returns an error
// wrapping ErrKeyInvalid for a malformed key, ErrNotFound, or a store error
// (seal.ErrKeyUnknown and seal.ErrUndecryptable included, from a store that seals answers).
func (k *Keeper) Lookup(ctx context.Context, scope, key string) (*Record, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	return k.store.Get(ctx, scope, key, k.now())
}
