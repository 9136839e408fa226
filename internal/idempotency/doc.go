// Package idempotency makes a retried POST safe: for one scope (in this API,
// a merchant) and one Idempotency-Key, the business effect happens at most
// once, and every answer the client gets is consistent with it.
//
// This package is the core, and imports no web framework, ORM or cache
// client. Beside it: ginidem (the Gin middleware), gormstore (the Store on
// PostgreSQL and SQLite, and the transaction of Atomic requests), redisidem
// (a Redis cache and limiter), localcache (one process's memory of
// completed records, Config.Memory), locallimit (one process's quota of new
// keys), janitor (the purge of expired records), sendhttp (an outside call
// over HTTP, its outcome sorted as an Effect needs), storetest (the
// contract every Store runs) and explore (the schedule explorer, which runs
// this package's protocol under every interleaving it can reach;
// docs/design/protocol.md is the protocol as a table of moves). Each is
// optional; internal/app wires them. The core imports none of them; it
// uses two small packages of no domain, internal/canon (canonical JSON) and
// internal/flights (identical requests in one process queue behind one
// leader).
//
// The files, in the order the sections below follow them:
//
//	record.go, ports.go        the record, the answer; the Store, Cache, Memory,
//	                           Limiter and Transactor ports
//	keeper.go, config.go       the Keeper and what it is told; observer.go,
//	                           clock.go, errors.go its outcomes, time, refusals
//	request.go, key.go,        reading a keyed request: the key, the body, its
//	fingerprint.go             canonical fingerprint
//	handle.go, decide.go       the loop over one pure decision; cache.go the
//	                           replays from memory and the Cache
//	atomic.go, guarded.go      the two ways to run a keyed request; guarded.go
//	                           holds Op, a Guarded request's operation
//	effect.go, call.go,        an outside call in phases (Effect.Run), its
//	derive.go                  states and moves, its derived id and key
//	claim.go, reconcile.go,    work outside a request: the claim on a record,
//	schedule.go                the reconciler's loop, when it looks again
//	operator.go, lookup.go     an operator's commands; a key's record for the
//	                           introspection endpoint
//
// # The record
//
// Each (scope, key) has at most one row in idempotency_records. The row
// holds the request's fingerprint (method, route, path parameters and the
// body as RFC 8785 canonical JSON, hashed), a state (executing or completed),
// a recovery point, a fencing token, a lock deadline, the stored response,
// and an expiry. The primary key (scope, key) is the only
// arbiter of who owns a key: a request reserves it with an insert-if-absent
// (INSERT ... ON CONFLICT DO NOTHING, or DO UPDATE for an expired row), never
// by reading first and writing after, which two concurrent requests would
// both pass.
//
// # The path of a request
//
// Handle checks the key and the body, looks for a completed record in the
// cache, and queues behind an identical request already running in this
// process (see below). Then it loops over one pure decision, decide, from
// (record, fingerprint, now, mode) to the next step: execute, reserve,
// replay, refuse a different request (422), wait for the original, or take
// an abandoned record over. Each step either ends the request or reads the
// record again; the loop is bounded, and the request ends in exactly one
// answer or refusal, whose outcome the Observer hears once.
//
// # Two ways to run a keyed request
//
// Atomic, for operations that only touch the database (creating an order).
// The handler runs inside a transaction owned by the layer (its Transactor),
// which begins at the handler's first statement, so decoding and validating
// a body hold no connection. When its answer is a success to keep, the record
// is inserted already completed, with the response, in the same transaction:
// the order and its record commit together or not at all. If another request
// holds the key, the insert is refused, the transaction rolls back, and the
// request is answered from the other's record. A kept answer that is an
// error (a business conflict) had no effect, so its transaction rolls back
// and the record is inserted alone; that is also what keeps a handler whose
// statement failed right on PostgreSQL, where a failed statement aborts the
// transaction. A crash at any point leaves either both rows or neither.
// The contract for an Atomic handler: no effect outside the transaction,
// and a statement that fails is answered with an error, never a success.
//
// Guarded, for operations with an effect outside the database (a charge at
// the payment provider), which no database transaction can roll back. The
// middleware first reserves the key with an executing record that carries
// its first fence (FirstFence) and a lock deadline. The handler runs its outside call through an
// Effect (effect.go), whose phases record recovery points in the same
// transactions as its own durable steps: create the resource and its call,
// record the intent, call under a key derived from the client's operation
// (derive.go), settle and store the answer. Every write is conditional on
// the record's fence.
// A retry that finds the record locked waits; one that finds the lock run
// out takes the record over by bumping the fence (compare-and-set) and
// resumes from the last recovery point. The previous owner, if it was only
// slow and not dead, now fails every write with ErrFenced.
//
// Work outside any request can take a record over too (Keeper.Reconcile,
// in reconcile.go): a reconciler that settles or cancels an abandoned call
// claims its record first, as a retry would (claim.go), so a late retry of
// the key waits for it; the claim is an Op like a retry's, and runs the
// same phases, storing the key's final answer with the fence in the same
// transaction as the settle or the cancel. Whichever of the two owns
// the record first wins; the other finds it taken. A call whose owner lost
// the fence after recording its intent is never canceled: its outcome is
// unknown until the provider answers the same key.
//
// # What is stored, and what gives the key back
//
// A handler returns its answer as a value (Answer), and the answer says
// whether it is final: the operation's outcome, stored with its status,
// body and the headers that describe the result (Config.StoredHeaders), and
// replayed with Idempotent-Replayed: true and a byte-identical body. The
// application decides finality where it maps each error to an answer (this
// API: its error table, where a decline and the business 409s are final).
// Anything else (validation errors, 404, 5xx, "provider unavailable", a
// temporary conflict, the layer's own 409 and 422) is not stored: a record
// with nothing durable behind it is deleted, so the key may be sent again;
// one past its first recovery point is unlocked, so the next retry resumes
// it at once. A 202 (outcome unknown at the provider) keeps the record open
// the same way until a retry or the reconciler learns the outcome.
//
// # Duplicates in flight
//
// Concurrent duplicates inside one process queue behind one leader
// (internal/flights) and are handed its stored record when it lands, so a
// retry storm costs one database conversation per key per process. Across
// processes, a duplicate polls the record with a growing pause, holding no
// connection between reads, for at most Config.Wait, and then answers
// InProgressError (409 with Retry-After). Its pauses and hints are the named
// Config's timeouts (WriteTimeout, PollMin, …).
//
// # Time
//
// Every decision about locks and expiry reads an injected Clock, so tests
// move time instead of sleeping. An expired record is absent for every read;
// the janitor (package janitor, beside the core) deletes expired rows
// later, in small batches on the expiry index, and correctness never waits
// for it.
package idempotency
