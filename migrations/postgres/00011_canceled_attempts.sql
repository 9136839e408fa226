-- +goose Up
-- Abandoned attempts end. A payment or refund that never reached the
-- provider can be canceled by the reconciler (status canceled: final, and
-- outside payments_one_active_per_order, so the order is payable again), and
-- last_attempt_at is when a request last worked on it (its creation, or a
-- retry under its key resuming it): the reconciler cancels only one that has
-- had no attempt for PENDING_CANCEL_AFTER. (Numbered 00011 although 00007
-- and 00008 are free: goose refuses out-of-order migrations on a database
-- already at 00010.)
ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check
    CHECK (status IN ('pending', 'processing', 'succeeded', 'failed', 'canceled'));
ALTER TABLE payments ADD COLUMN last_attempt_at TIMESTAMPTZ;
UPDATE payments SET last_attempt_at = updated_at;
ALTER TABLE payments ALTER COLUMN last_attempt_at SET NOT NULL;

ALTER TABLE refunds DROP CONSTRAINT refunds_status_check;
ALTER TABLE refunds ADD CONSTRAINT refunds_status_check
    CHECK (status IN ('pending', 'processing', 'succeeded', 'failed', 'canceled'));
ALTER TABLE refunds ADD COLUMN last_attempt_at TIMESTAMPTZ;
UPDATE refunds SET last_attempt_at = updated_at;
ALTER TABLE refunds ALTER COLUMN last_attempt_at SET NOT NULL;

-- +goose Down
ALTER TABLE refunds DROP COLUMN last_attempt_at;
UPDATE refunds SET status = 'failed' WHERE status = 'canceled';
ALTER TABLE refunds DROP CONSTRAINT refunds_status_check;
ALTER TABLE refunds ADD CONSTRAINT refunds_status_check
    CHECK (status IN ('pending', 'processing', 'succeeded', 'failed'));
ALTER TABLE payments DROP COLUMN last_attempt_at;
UPDATE payments SET status = 'failed' WHERE status = 'canceled';
ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check
    CHECK (status IN ('pending', 'processing', 'succeeded', 'failed'));
