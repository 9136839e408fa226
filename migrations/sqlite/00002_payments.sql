-- +goose Up
-- Payments and refunds through the payment provider. The database holds the
-- invariants itself, so no code path (a bug, a race, a stale process) can
-- break them:
--   * at most one active or succeeded payment per order (partial unique index);
--   * a provider key is used by one payment or refund only (unique);
--   * refunds never exceed the payment (CHECK on amount_refunded, plus the
--     row lock the service takes before reserving a refund).

CREATE TABLE payments (
    merchant_id        TEXT NOT NULL,
    id                 TEXT NOT NULL,
    order_id           TEXT NOT NULL,
    amount             INTEGER NOT NULL CHECK (amount >= 0),
    currency           TEXT NOT NULL,
    payment_method     TEXT NOT NULL,
    -- pending: created, provider call not known to have happened;
    -- processing: provider outcome unknown; succeeded / failed: final.
    status             TEXT NOT NULL CHECK (status IN ('pending', 'processing', 'succeeded', 'failed')),
    provider_key       TEXT NOT NULL,
    provider_charge_id TEXT,
    decline_code       TEXT,
    amount_refunded    INTEGER NOT NULL DEFAULT 0,
    -- The client's Idempotency-Key, so the reconciler and webhooks can finish
    -- the record of the request that created the payment.
    idempotency_key    TEXT NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    updated_at         TIMESTAMP NOT NULL,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, order_id) REFERENCES orders (merchant_id, id),
    CHECK (amount_refunded >= 0 AND amount_refunded <= amount)
);
CREATE UNIQUE INDEX payments_provider_key ON payments (merchant_id, provider_key);
CREATE UNIQUE INDEX payments_one_active_per_order ON payments (merchant_id, order_id)
    WHERE status IN ('pending', 'processing', 'succeeded');
-- Provider events name our payment id only (their reference).
CREATE INDEX payments_id ON payments (id);
-- The reconciler's work list.
CREATE INDEX payments_unresolved ON payments (updated_at)
    WHERE status IN ('pending', 'processing');

CREATE TABLE refunds (
    merchant_id        TEXT NOT NULL,
    id                 TEXT NOT NULL,
    payment_id         TEXT NOT NULL,
    amount             INTEGER NOT NULL CHECK (amount > 0),
    currency           TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('pending', 'processing', 'succeeded', 'failed')),
    provider_key       TEXT NOT NULL,
    provider_refund_id TEXT,
    idempotency_key    TEXT NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    updated_at         TIMESTAMP NOT NULL,
    PRIMARY KEY (merchant_id, id),
    FOREIGN KEY (merchant_id, payment_id) REFERENCES payments (merchant_id, id)
);
CREATE UNIQUE INDEX refunds_provider_key ON refunds (merchant_id, provider_key);
CREATE INDEX refunds_payment ON refunds (merchant_id, payment_id);
CREATE INDEX refunds_id ON refunds (id);
CREATE INDEX refunds_unresolved ON refunds (updated_at)
    WHERE status IN ('pending', 'processing');

-- The webhook inbox: the event id is unique, and the row is inserted in the
-- same transaction as the event's effect, so each event applies once however
-- often the provider delivers it.
CREATE TABLE webhook_events (
    event_id    TEXT PRIMARY KEY,
    type        TEXT NOT NULL,
    received_at TIMESTAMP NOT NULL
);

-- +goose Down
DROP TABLE webhook_events;
DROP TABLE refunds;
DROP TABLE payments;
