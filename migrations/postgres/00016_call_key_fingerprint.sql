-- +goose Up
-- Which PROVIDER_KEY_SECRET derived each outside call's id and provider key:
-- a short fingerprint (idempotency.KeyFingerprint), never the secret. An
-- instance whose secret differs from the recent calls' refuses to start
-- unless PROVIDER_KEY_SECRET_PREVIOUS names the old one (internal/app). The
-- calls from before are given the fingerprint of the secret in force at the
-- first start after this migration. The same columns as
-- internal/idempotency/gormstore/schema/postgres.sql.
ALTER TABLE outside_calls ADD COLUMN key_fingerprint TEXT;
CREATE INDEX outside_calls_created ON outside_calls (created_at);

-- +goose Down
DROP INDEX outside_calls_created;
ALTER TABLE outside_calls DROP COLUMN key_fingerprint;
