-- +goose Up
-- Stored response bodies may be encrypted at rest (RESPONSE_ENCRYPTION_KEYS).
-- The id of the key a body is encrypted with is kept beside it, so keys can
-- be rotated while older records still replay; NULL means stored in clear.
ALTER TABLE idempotency_records ADD COLUMN response_key_id TEXT;

-- The metrics count the executing records and find the oldest one at every
-- scrape; this index holds only those few rows, however large the table.
CREATE INDEX idempotency_records_executing ON idempotency_records (created_at)
    WHERE state = 'executing';

-- +goose Down
DROP INDEX idempotency_records_executing;
ALTER TABLE idempotency_records DROP COLUMN response_key_id;
