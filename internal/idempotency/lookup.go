package idempotency

import "context"

// Lookup returns merchantID's live record under key, for the key
// introspection endpoint (GET /v1/idempotency-keys/{key}). Keys are scoped
// to the merchant, so another merchant's record under the same key is not
// found. It returns an error wrapping ErrKeyInvalid for a malformed key,
// ErrNotFound, or a store error (ErrResponseKeyUnknown and
// ErrResponseUndecryptable included).
func (k *Keeper) Lookup(ctx context.Context, merchantID, key string) (*Record, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	return k.store.Get(ctx, merchantID, key, k.clock.Now())
}
