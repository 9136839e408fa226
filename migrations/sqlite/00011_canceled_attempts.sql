-- +goose Up
-- Abandoned attempts end (see the PostgreSQL migration of the same number):
-- status canceled, and last_attempt_at. SQLite cannot change a CHECK
-- constraint, so both tables are rebuilt. The child (refunds) is copied
-- into a table that references the new parent, and the old tables are
-- dropped child first, so no foreign key is ever left dangling; renaming
-- the new parent rewrites the reference. (Numbered 00011: goose refuses
-- out-of-order migrations on a database already at 00010.)
CREATE TABLE payments_new (
    merchant_id        TEXT NOT NULL,
    id                 TEXT NOT NULL,
    order_id           TEXT NOT NULL,
    amount             INTEGER NOT NULL CHECK (amount >= 0),
    currency           TEXT NOT NULL,
    payment_method     TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('pending', 'processing', 'succeeded', 'failed', 'canceled')),
    provider_key       TEXT NOT NULL,
    provider_charge_id TEXT,
    decline_code       TEXT,
    amount_refunded    INTEGER NOT NULL DEFAULT 0,
    idempotency_key    TEXT NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    updated_at         TIMESTAMP NOT NULL,
    trace_parent       TEXT NOT NULL DEFAULT '',
    last_attempt_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id),
    CHECK (amount_refunded >= 0 AND amount_refunded <= amount)
);
INSERT INTO payments_new (merchant_id, id, order_id, amount, currency, payment_method, status, provider_key,
    provider_charge_id, decline_code, amount_refunded, idempotency_key, created_at, updated_at, trace_parent, last_attempt_at)
SELECT merchant_id, id, order_id, amount, currency, payment_method, status, provider_key,
    provider_charge_id, decline_code, amount_refunded, idempotency_key, created_at, updated_at, trace_parent, updated_at
FROM payments;

CREATE TABLE refunds_new (
    merchant_id        TEXT NOT NULL,
    id                 TEXT NOT NULL,
    payment_id         TEXT NOT NULL,
    amount             INTEGER NOT NULL CHECK (amount > 0),
    currency           TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('pending', 'processing', 'succeeded', 'failed', 'canceled')),
    provider_key       TEXT NOT NULL,
    provider_refund_id TEXT,
    idempotency_key    TEXT NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    updated_at         TIMESTAMP NOT NULL,
    trace_parent       TEXT NOT NULL DEFAULT '',
    last_attempt_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, payment_id) REFERENCES payments_new (merchant_id, id)
);
INSERT INTO refunds_new (merchant_id, id, payment_id, amount, currency, status, provider_key, provider_refund_id,
    idempotency_key, created_at, updated_at, trace_parent, last_attempt_at)
SELECT merchant_id, id, payment_id, amount, currency, status, provider_key, provider_refund_id,
    idempotency_key, created_at, updated_at, trace_parent, updated_at
FROM refunds;

DROP TABLE refunds;
DROP TABLE payments;
ALTER TABLE payments_new RENAME TO payments;
ALTER TABLE refunds_new RENAME TO refunds;

CREATE UNIQUE INDEX payments_provider_key ON payments (merchant_id, provider_key);
CREATE UNIQUE INDEX payments_one_active_per_order ON payments (merchant_id, order_id)
    WHERE status IN ('pending', 'processing', 'succeeded');
CREATE INDEX payments_id ON payments (id);
CREATE INDEX payments_unresolved ON payments (updated_at)
    WHERE status IN ('pending', 'processing');
CREATE UNIQUE INDEX refunds_provider_key ON refunds (merchant_id, provider_key);
CREATE INDEX refunds_payment ON refunds (merchant_id, payment_id);
CREATE INDEX refunds_id ON refunds (id);
CREATE INDEX refunds_unresolved ON refunds (updated_at)
    WHERE status IN ('pending', 'processing');

-- +goose Down
-- The rebuild is not undone: canceled rows become failed, and the column
-- stays (SQLite keeps the wider CHECK; the code of 00010 never writes it).
UPDATE refunds SET status = 'failed' WHERE status = 'canceled';
UPDATE payments SET status = 'failed' WHERE status = 'canceled';
