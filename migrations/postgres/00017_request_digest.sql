-- +goose Up
-- The SHA-256 of the request that made a record, as it was sent
-- (idempotency.Record.Sent): a retry of the very same bytes is known by it,
-- on an instance that never saw the key, without canonicalizing the body
-- again. NULL for the records stored before; their retries are
-- canonicalized, as before. The same column as
-- internal/idempotency/gormstore/schema/postgres.sql.
ALTER TABLE idempotency_records ADD COLUMN request_digest BYTEA;

-- +goose Down
ALTER TABLE idempotency_records DROP COLUMN request_digest;
