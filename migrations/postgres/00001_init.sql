-- +goose Up
-- Every table holding merchant data leads its primary key with merchant_id,
-- so one request's transaction touches one merchant's rows and the schema can
-- be sharded by merchant without a rewrite.

CREATE TABLE merchants (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL
);

-- API keys are stored as the hex SHA-256 of the key; the key itself is shown
-- once, when it is made.
CREATE TABLE api_keys (
    key_hash    TEXT PRIMARY KEY,
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    key_prefix  TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX api_keys_merchant ON api_keys (merchant_id);

CREATE TABLE orders (
    merchant_id  TEXT NOT NULL REFERENCES merchants (id),
    id           TEXT NOT NULL,
    customer_id  TEXT NOT NULL,
    currency     TEXT NOT NULL,
    items        JSONB NOT NULL,
    metadata     JSONB NOT NULL,
    amount_total BIGINT NOT NULL CHECK (amount_total >= 0),
    status       TEXT NOT NULL,
    version      BIGINT NOT NULL DEFAULT 1,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (merchant_id, id)
);
-- Ids are ULID-based, so id order is creation order: lists page on the id.
CREATE INDEX orders_customer ON orders (merchant_id, customer_id, id);

-- One row per (merchant, Idempotency-Key). The primary key is the
-- reservation: an insert-if-absent decides which request owns a key.
CREATE TABLE idempotency_records (
    merchant_id      TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    method           TEXT NOT NULL,
    path             TEXT NOT NULL,
    fingerprint      TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('executing', 'completed')),
    recovery_point   TEXT NOT NULL,
    fence            BIGINT NOT NULL,
    locked_until     TIMESTAMPTZ NOT NULL,
    response_status  INTEGER,
    response_headers TEXT,
    response_body    BYTEA,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    expires_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (merchant_id, idempotency_key)
);
-- The janitor deletes expired records in small batches walking this index.
CREATE INDEX idempotency_records_expires ON idempotency_records (expires_at);

-- +goose Down
DROP TABLE idempotency_records;
DROP TABLE orders;
DROP TABLE api_keys;
DROP TABLE merchants;
