-- +goose Up
-- The transactional outbox: events are written in the same transaction as
-- the change they describe, so an event exists if and only if its change
-- committed. A dispatcher publishes them afterwards, at least once.
CREATE TABLE outbox_events (
    merchant_id  TEXT NOT NULL,
    id           TEXT NOT NULL,
    type         TEXT NOT NULL,
    payload      JSONB NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    published_at TIMESTAMPTZ,
    PRIMARY KEY (merchant_id, id)
);
-- The dispatcher's work list: only unpublished events, oldest first.
CREATE INDEX outbox_events_unpublished ON outbox_events (created_at)
    WHERE published_at IS NULL;

-- +goose Down
DROP TABLE outbox_events;
