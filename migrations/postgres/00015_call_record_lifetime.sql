-- +goose Up
-- Which lifetime of the client's key each outside call was made under: the
-- CreatedAt of the idempotency record that made it. A key may be used again
-- once its record expired, and the derived id of a new call counts only the
-- calls of earlier lifetimes, so every owner of one record derives the same
-- id and finds the call the record made, never a second one
-- (internal/idempotency/effect.go, begin). Calls made before stay NULL and
-- count as earlier ones. The same column as
-- internal/idempotency/gormstore/schema/postgres.sql.
ALTER TABLE outside_calls ADD COLUMN record_created_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE outside_calls DROP COLUMN record_created_at;
