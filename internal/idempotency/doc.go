// Package idempotency makes a retried POST safe: for one scope (in this API,
// a merchant) and one Idempotency-Key, the business effect happens at most
// once, and every answer the client gets is consistent with it.
//
// This package is the core: no web framework, ORM or cache client. Beside
// it, each optional and wired in internal/app: ginidem (the Gin
// middleware), gormstore (the Store on PostgreSQL and SQLite, and the
// Transactor), redisidem (a Redis cache and limiter), localcache (one
// process's memory of completed records, in front of Redis's), locallimit
// (the quota of new keys, asked through Config.NewKey), janitor (the purge
// of expired records), retrywrite (a failed record write tried again in the
// background, Config.Retry), seal (answers encrypted at rest), sendhttp (an
// outside call over HTTP, its outcome sorted), storetest (the contract every Store runs) and explore (the
// protocol run under every interleaving it can reach; the protocol as a
// table of moves is docs/design/protocol.md). The core uses internal/canon
// (canonical JSON and the request's digest) and internal/flights
// (identical requests in one process queue behind one leader).
//
// The files, in the order the sections below follow them:
//
//	record.go, ports.go        the record, the answer; the Store, Cache
//	                           and Transactor ports
//	keeper.go, config.go       the Keeper and what it is told (its clock
//	                           too); observer.go, errors.go its outcomes and
//	                           refusals
//	request.go                 reading a keyed request: the key, the body, its
//	                           canonical fingerprint
//	handle.go, decide.go       the loop over one pure decision
//	atomic.go, guarded.go      the two ways to run a keyed request; guarded.go
//	                           holds Op, a Guarded request's operation
//	effect.go, call.go,        an outside call in phases (Effect.Run) and an
//	derive.go                  operator's ruling (Effect.Rule), its states
//	                           and moves, its derived id and key
//	claim.go, reconcile.go,    work outside a request: the claim on a record,
//	schedule.go                the reconciler's round, when it looks again
//
// # The record
//
// Each (scope, key) has at most one row in idempotency_records: the
// request's fingerprint (method, route, path parameters and the body as RFC
// 8785 canonical JSON, hashed) and digest (its bytes as sent), a state, a
// recovery point, a fencing token, a lock deadline, the stored answer and
// an expiry. Its primary key is the only arbiter of who owns a key: a
// request reserves it with an insert-if-absent, never by reading first and
// writing after, which two concurrent requests would both pass.
//
// # The path of a request
//
// Keeper.Atomic and Keeper.Guarded check the key, read the body, replay a
// completed record from the Cache, and queue behind a request of the same
// bytes in this process. Then they loop over one pure decision, decide,
// from (record, fingerprint, now, Guarded or not) to the next step: execute or
// reserve (a new key, once Config.NewKey lets it), replay, refuse another
// body (422), wait for the original (holding no connection, at most
// Config.Wait, then 409 with Retry-After), or take an abandoned record
// over. The loop ends in exactly one answer, whose outcome the Observer
// hears once. Locks and expiry read Config.Now; an expired record is absent
// for every read (for a store that keeps tombstones, Get reads it expired).
//
// # Two ways to run a keyed request
//
// Atomic, for an operation that only touches the database (creating an
// order): the key's record is read first, so a retry replays without
// running the handler on any instance; a new key's handler runs in a
// transaction of the layer's (Transactor), and a success to keep is
// inserted as a completed record in that same transaction, so the order
// and its record commit together or not at all. A key taken meanwhile
// rolls the work back and replays the other's record.
// The handler's contract: no effect outside the transaction, and a failed
// statement answered with an error.
//
// Guarded, for an operation with an effect outside the database (a
// charge), which no transaction can roll back. The key is reserved first
// (an executing record with its first fence and a lock deadline); the
// handler gets the operation (Op) and runs its outside call through an
// Effect (effect.go), whose phases record recovery points in the same
// transactions as their own writes, each fenced. A retry that finds the
// lock run out takes the record over by bumping the fence and resumes from
// the point it took; a slow previous owner then fails every write with
// ErrFenced. The reconciler claims a record the same way (claim.go) and
// runs the same phases (docs/design/operation.md).
//
// # What is stored, and what gives the key back
//
// A handler's Answer says whether it is final: the operation's outcome,
// stored with its status, body and the headers that describe it, and
// replayed byte for byte (this API: a success, a decline and the business
// 409s). Anything else (validation, 404, 5xx, the layer's own 409 and 422)
// is not stored: a record with nothing durable behind it is deleted, so the
// key may be sent again, and one past its first recovery point is
// unlocked, for the next retry to resume. A 202 keeps the record open
// until a retry or the reconciler learns the outcome.
package idempotency
