package app

import (
	"fmt"
	"log/slog"

	"github.com/idemkeys/payments/internal/idempotency/seal"

	"github.com/idemkeys/payments/internal/config"
)

// responseCipher turns RESPONSE_ENCRYPTION_KEYS into the cipher that
// encrypts stored response bodies, in the database and in the Redis cache;
// nil when the setting is empty.
func responseCipher(cfg config.Config, log *slog.Logger) (*seal.Cipher, error) {
	keys, active, err := cfg.ResponseKeys()
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if keys == nil {
		return nil, nil
	}
	c, err := seal.New(keys, active)
	if err != nil {
		return nil, fmt.Errorf("configuration: RESPONSE_ENCRYPTION_KEYS: %w", err)
	}
	log.Info("stored responses are encrypted at rest", "active_key_id", c.ActiveKeyID(), "key_ids", c.KeyIDs())
	return c, nil
}
