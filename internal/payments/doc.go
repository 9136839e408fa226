// Package payments is the domain of the API: orders now, payments and refunds
// next. It holds the rules (what a valid order is, how its total is made),
// the Service that runs the use cases, and the Store interface the Service
// consumes, with its GORM implementation.
//
// The package knows nothing of HTTP or of idempotency keys. What it does know
// is that a caller may own a database transaction: every Store method works
// through database.Conn, so when the idempotency layer runs a request inside
// a transaction it carries in the context, the order is written in that same
// transaction and commits (or rolls back) together with the idempotency
// record. That is what makes "the order exists" and "the key is completed"
// one fact instead of two.
//
// Ids are a prefix and a ULID ("ord_01J..."). A ULID starts with its creation
// time in milliseconds and this process makes them monotonic within a
// millisecond, so ordering by id is ordering by creation: lists page on the
// id alone, newest first, with the primary key index doing the work.
//
// Errors are the sentinels in errors.go, wrapped with %w, and the typed
// *ValidationError; the HTTP layer maps them to problem+json in one table.
package payments
