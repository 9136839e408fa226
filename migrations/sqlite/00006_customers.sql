-- +goose Up
-- One customer per email per merchant. The email is stored normalized (trimmed,
-- lower case) by the API, so a plain unique index compares it
-- case-insensitively on both dialects.
CREATE TABLE customers (
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    id          TEXT NOT NULL,
    email       TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (merchant_id, id)
);
CREATE UNIQUE INDEX customers_email ON customers (merchant_id, email);

-- +goose Down
DROP TABLE customers;
