-- The table of idempotency records, for a service that starts fresh: the
-- same table this project's migrations build step by step. merchant_id is
-- the scope column (the Go side calls it Scope): the key of one tenant.
--
-- One row per (scope, Idempotency-Key). The primary key is the reservation:
-- an insert-if-absent decides which request owns a key.
CREATE TABLE IF NOT EXISTS idempotency_records (
    merchant_id      TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    method           TEXT NOT NULL,
    path             TEXT NOT NULL,
    fingerprint      TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('executing', 'completed')),
    recovery_point   TEXT NOT NULL,
    fence            INTEGER NOT NULL,
    locked_until     TIMESTAMP NOT NULL,
    response_status  INTEGER,
    response_headers TEXT,
    response_body    BLOB,
    created_at       TIMESTAMP NOT NULL,
    updated_at       TIMESTAMP NOT NULL,
    expires_at       TIMESTAMP NOT NULL,
    response_key_id  TEXT,
    request_digest   BLOB,
    PRIMARY KEY (merchant_id, idempotency_key)
);
-- The janitor deletes expired records in small batches walking this index.
CREATE INDEX IF NOT EXISTS idempotency_records_expires ON idempotency_records (expires_at);
-- The metrics count the executing records and find the oldest one; this
-- index holds only those few rows, however large the table.
CREATE INDEX IF NOT EXISTS idempotency_records_executing ON idempotency_records (created_at)
    WHERE state = 'executing';

-- What is left of a record after the janitor purged it, when the store keeps
-- tombstones (WithTombstones): enough to refuse a late reuse of the key until
-- expires_at (the record's expiry plus the tombstone TTL).
CREATE TABLE IF NOT EXISTS idempotency_tombstones (
    merchant_id     TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    first_seen_at   TIMESTAMP NOT NULL,
    purged_at       TIMESTAMP NOT NULL,
    expires_at      TIMESTAMP NOT NULL,
    PRIMARY KEY (merchant_id, idempotency_key)
);
CREATE INDEX IF NOT EXISTS idempotency_tombstones_expires ON idempotency_tombstones (expires_at);

-- One row per operation with an effect outside the database (a charge, a
-- refund), beside the application's own row of the resource: the key the
-- outside service gets, whether an owner may be calling it now (the
-- intent, under its fence), what is known of the outcome, and when the
-- reconciler next looks (internal/idempotency/call.go). merchant_id is the
-- scope; id the resource's.
CREATE TABLE IF NOT EXISTS outside_calls (
    merchant_id  TEXT NOT NULL,
    id           TEXT NOT NULL,
    kind         TEXT NOT NULL,
    client_key   TEXT NOT NULL,
    call_key     TEXT NOT NULL,
    key_version  INTEGER NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('ready', 'calling', 'unknown', 'done', 'canceled', 'flagged')),
    intent_fence INTEGER NOT NULL,
    intent_at    TIMESTAMP,
    attempted_at TIMESTAMP NOT NULL,
    due_at       TIMESTAMP,
    checks       INTEGER NOT NULL,
    trace_parent TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    updated_at   TIMESTAMP NOT NULL,
    -- The lifetime of the client's key the call was made under: the
    -- CreatedAt of its record (NULL for a call the system started, or made
    -- before calls knew it).
    record_created_at TIMESTAMP,
    -- Which secret derived the call's id and key (idempotency.KeyFingerprint).
    key_fingerprint TEXT,
    PRIMARY KEY (merchant_id, id)
);
-- A key is sent for one call only.
CREATE UNIQUE INDEX IF NOT EXISTS outside_calls_key ON outside_calls (merchant_id, kind, call_key);
-- The generation of a derived id counts the calls under the client's key.
CREATE INDEX IF NOT EXISTS outside_calls_client_key ON outside_calls (merchant_id, client_key, kind);
-- The reconciler's work list: only the calls not settled yet.
CREATE INDEX IF NOT EXISTS outside_calls_due ON outside_calls (due_at) WHERE due_at IS NOT NULL;
-- The start's check of the recent calls' secret (KeyFingerprints).
CREATE INDEX IF NOT EXISTS outside_calls_created ON outside_calls (created_at);
