-- +goose Up
-- The retention purge (EVENT_RETENTION) deletes published outbox events and
-- webhook inbox rows oldest first, in batches: each batch finds its rows
-- through these indexes instead of scanning the tables.
CREATE INDEX outbox_events_published ON outbox_events (published_at)
    WHERE published_at IS NOT NULL;
CREATE INDEX webhook_events_received ON webhook_events (received_at);

-- +goose Down
DROP INDEX webhook_events_received;
DROP INDEX outbox_events_published;
