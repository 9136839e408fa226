-- +goose Up
-- The W3C trace context (traceparent) of the request or transaction that
-- wrote the row, empty when it was not traced. The reconciler and the
-- finisher start their spans linked to a payment's or refund's, so a trace
-- viewer leads from the work that settled it back to the request that made
-- it; the outbox dispatcher sends an event's on with the event, and a
-- consumer continues that trace.
ALTER TABLE payments ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
ALTER TABLE refunds ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox_events ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE outbox_events DROP COLUMN trace_parent;
ALTER TABLE refunds DROP COLUMN trace_parent;
ALTER TABLE payments DROP COLUMN trace_parent;
