-- +goose Up
-- What is left of an idempotency record after the janitor purged it, when
-- IDEMPOTENCY_TOMBSTONES=true: enough to refuse a late reuse of the key (its
-- fingerprint) until expires_at, the record's expiry plus
-- IDEMPOTENCY_TOMBSTONE_TTL. merchant_id is the scope, as in the records.
CREATE TABLE idempotency_tombstones (
    merchant_id     TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    first_seen_at   TIMESTAMP NOT NULL,
    purged_at       TIMESTAMP NOT NULL,
    expires_at      TIMESTAMP NOT NULL,
    PRIMARY KEY (merchant_id, idempotency_key)
);
-- The janitor deletes tombstones in small batches walking this index.
CREATE INDEX idempotency_tombstones_expires ON idempotency_tombstones (expires_at);

-- +goose Down
DROP TABLE idempotency_tombstones;
