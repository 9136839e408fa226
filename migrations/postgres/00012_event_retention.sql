-- +goose Up
-- The retention purge (EVENT_RETENTION) deletes published outbox events and
-- webhook inbox rows oldest first, in batches: each batch finds its rows
-- through these indexes instead of scanning tables that, before the purge
-- existed, only grew.
--
-- A plain CREATE INDEX blocks writes to the table while it builds, which on
-- a large outbox_events means a pause at the upgrade. To avoid it, build the
-- two indexes beforehand by hand with the same names, CONCURRENTLY (outside
-- a transaction); IF NOT EXISTS then makes this migration a no-op. It is not
-- done here because CONCURRENTLY waits for every older transaction in the
-- database, and start-up would wait with it, holding the migration lock.
CREATE INDEX IF NOT EXISTS outbox_events_published ON outbox_events (published_at)
    WHERE published_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS webhook_events_received ON webhook_events (received_at);

-- +goose Down
DROP INDEX IF EXISTS webhook_events_received;
DROP INDEX IF EXISTS outbox_events_published;
