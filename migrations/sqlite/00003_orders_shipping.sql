-- +goose Up
-- The shipping address of an order, set (and set again) by
-- PUT /v1/orders/{id}/shipping-address. NULL until the first PUT. It is one
-- JSON value rather than six columns because it is only ever written and read
-- whole: a PUT replaces it, it is never queried by its parts.
--
-- Every change to an order (this address, an added item, the payment) bumps
-- orders.version with a conditional UPDATE; the API shows the version as the
-- order's ETag and honours If-Match against it.
ALTER TABLE orders ADD COLUMN shipping_address TEXT;

-- +goose Down
ALTER TABLE orders DROP COLUMN shipping_address;
