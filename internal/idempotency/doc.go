// Package idempotency makes a retried POST safe: for one merchant and one
// Idempotency-Key, the business effect happens at most once, and every answer
// the client gets is consistent with it.
//
// # The record
//
// Each (merchant, key) has at most one row in idempotency_records. The row
// holds the request's fingerprint (method, route, path parameters and the
// body as RFC 8785 canonical JSON, hashed), a state (executing or completed),
// a recovery point, a fencing token, a lock deadline, the stored response,
// and an expiry. The primary key (merchant_id, idempotency_key) is the only
// arbiter of who owns a key: a request reserves it with an insert-if-absent
// (INSERT ... ON CONFLICT DO NOTHING, or DO UPDATE for an expired row), never
// by reading first and writing after, which two concurrent requests would
// both pass.
//
// # Two ways to run a keyed request
//
// Atomic, for operations that only touch the database (creating an order).
// The handler runs inside a transaction owned by the middleware; when its
// answer is final, the record is inserted already completed, with the
// response, in the same transaction. So the order and its record commit
// together or not at all: two statements (the order, the record) and a
// commit. If another request holds the key, the insert does nothing, the
// transaction rolls back, and the request is answered from the other's
// record. A crash at any point leaves either both rows or neither.
//
// Guarded, for operations with an effect outside the database (a charge at
// the payment provider), which no database transaction can roll back. The
// middleware first reserves the key with an executing record that carries
// fence 1 and a lock deadline. The handler gets a Lease and records recovery
// points with it in the same transactions as its own durable steps. At the
// end the middleware stores the final response, conditional on its fence.
// A retry that finds the record locked waits; one that finds the lock run
// out takes the record over by bumping the fence (compare-and-set) and
// resumes from the last recovery point. The previous owner, if it was only
// slow and not dead, now fails every write with ErrFenced.
//
// # What is stored, and what gives the key back
//
// Final outcomes are stored and replayed with Idempotent-Replayed: true and
// a byte-identical body: 2xx except 202, 402, and the handler's 409 business
// conflicts. Anything else (validation errors, 404, 5xx, "provider
// unavailable", the middleware's own 409 and 422) is not stored: a record
// with nothing durable behind it is deleted, so the key may be sent again;
// one past its first recovery point is unlocked, so the next retry resumes
// it at once. A 202 (outcome unknown at the provider) keeps the record open
// the same way until a retry or the reconciler learns the outcome.
//
// # Duplicates in flight
//
// Concurrent duplicates inside one process queue behind one leader (see
// flights) and are handed its stored record when it lands, so a retry storm
// costs one database conversation per key per process. Across processes, a
// duplicate polls the record with a growing pause, holding no connection
// between reads, for at most Config.Wait, and then answers
// InProgressError (409 with Retry-After).
//
// # Time
//
// Every decision about locks and expiry reads an injected Clock, so tests
// move time instead of sleeping. An expired record is absent for every read;
// the Janitor deletes expired rows later, in small batches on the expiry
// index, and correctness never waits for it.
package idempotency
