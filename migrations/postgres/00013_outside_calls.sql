-- +goose Up
-- The outside calls of operations with an effect outside the database (a
-- charge, a refund), kept by the idempotency core beside the payments and
-- refunds: the key the provider gets, whether an owner may be calling it
-- now (its intent, under its fence), what is known of the outcome, and when
-- the reconciler next looks. See internal/idempotency/call.go and
-- docs/design/operation.md. The same table as
-- internal/idempotency/gormstore/schema/postgres.sql (a test holds them equal).
CREATE TABLE outside_calls (
    merchant_id  TEXT NOT NULL,
    id           TEXT NOT NULL,
    kind         TEXT NOT NULL,
    client_key   TEXT NOT NULL,
    call_key     TEXT NOT NULL,
    key_version  INTEGER NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('ready', 'calling', 'unknown', 'done', 'canceled', 'flagged')),
    intent_fence BIGINT NOT NULL,
    intent_at    TIMESTAMPTZ,
    attempted_at TIMESTAMPTZ NOT NULL,
    due_at       TIMESTAMPTZ,
    checks       INTEGER NOT NULL,
    trace_parent TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (merchant_id, id)
);
CREATE UNIQUE INDEX outside_calls_key ON outside_calls (merchant_id, kind, call_key);
CREATE INDEX outside_calls_client_key ON outside_calls (merchant_id, client_key, kind);
CREATE INDEX outside_calls_due ON outside_calls (due_at) WHERE due_at IS NOT NULL;

-- The payments and refunds not settled yet become calls: pending as ready
-- (nothing known to be in flight), processing as unknown; due at once. Their
-- keys stay what they were (key_version 0: the payment's own id).
INSERT INTO outside_calls (merchant_id, id, kind, client_key, call_key, key_version, state, intent_fence,
    intent_at, attempted_at, due_at, checks, trace_parent, created_at, updated_at)
SELECT merchant_id, id, 'payment', idempotency_key, provider_key, 0,
    CASE status WHEN 'processing' THEN 'unknown' ELSE 'ready' END, 0,
    NULL, last_attempt_at, updated_at, 0, COALESCE(trace_parent, ''), created_at, updated_at
FROM payments WHERE status IN ('pending', 'processing');
INSERT INTO outside_calls (merchant_id, id, kind, client_key, call_key, key_version, state, intent_fence,
    intent_at, attempted_at, due_at, checks, trace_parent, created_at, updated_at)
SELECT merchant_id, id, 'refund', idempotency_key, provider_key, 0,
    CASE status WHEN 'processing' THEN 'unknown' ELSE 'ready' END, 0,
    NULL, last_attempt_at, updated_at, 0, COALESCE(trace_parent, ''), created_at, updated_at
FROM refunds WHERE status IN ('pending', 'processing');

-- +goose Down
DROP TABLE outside_calls;
