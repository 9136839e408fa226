-- +goose Up
-- Effects nobody asked for: a succeeded charge or refund the provider holds
-- for a payment or refund we consider canceled or failed. An orphan charge
-- is refunded automatically (its row is the refund's resource, and its id
-- the refund's, derived from the charge's id, so it is refunded once
-- whoever finds it); an orphan refund is flagged for an operator. The
-- provider's id is unique per kind: found twice, an orphan is one row.
-- See internal/payments/orphan.go.
CREATE TABLE orphans (
    merchant_id        TEXT NOT NULL,
    id                 TEXT NOT NULL,
    kind               TEXT NOT NULL CHECK (kind IN ('charge', 'refund')),
    resource_id        TEXT NOT NULL,
    provider_id        TEXT NOT NULL,
    amount             INTEGER NOT NULL,
    currency           TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('refunding', 'refunded', 'flagged', 'resolved')),
    provider_key       TEXT NOT NULL,
    provider_refund_id TEXT NOT NULL,
    note               TEXT NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    updated_at         TIMESTAMP NOT NULL,
    PRIMARY KEY (merchant_id, id)
);
CREATE UNIQUE INDEX orphans_provider_id ON orphans (kind, provider_id);
CREATE INDEX orphans_open ON orphans (created_at) WHERE status IN ('refunding', 'flagged');
-- The flagged outside calls, which wait for an operator (api flagged) and
-- are counted at every scrape.
CREATE INDEX outside_calls_flagged ON outside_calls (merchant_id) WHERE state = 'flagged';

-- +goose Down
DROP INDEX outside_calls_flagged;
DROP TABLE orphans;
