// Package payments is the domain of the API: orders, payments and refunds,
// their rules and state machines, the Service that runs the use cases, the
// Reconciler, and the interfaces the Service consumes (its stores and the
// payment provider), with their GORM implementation.
//
// The package knows nothing of HTTP or of idempotency keys. It does know that
// a caller may own a database transaction: every store method works through
// database.Conn, so when the idempotency layer runs a request inside a
// transaction it carries in the context, the order (and its outbox event) is
// written in that same transaction and commits together with the idempotency
// record.
//
// # A charge in three phases
//
// A payment has an effect no transaction can undo: money moves at the
// provider. PayOrder therefore runs in three phases, each ending in a
// recovery point that the idempotency layer keeps (the Recovery interface):
//
//  1. one transaction: lock the order, insert the payment (pending) whose id
//     is also the provider key, record "payment_created:<id>";
//  2. the provider call, outside any transaction, under that provider key;
//  3. one transaction: the outcome, the order's status, the outbox event and
//     "payment_finished:<id>".
//
// A retry, or a request that takes over a crashed one, reads the recovery
// point, finds the payment, and resumes: it never inserts a second payment,
// and it repeats the provider call only under the same provider key, which
// the provider honours, so a charge made before a crash is found, not made
// again. The provider's answers come in three kinds, and each has its path:
// definitive (phase 3), not executed (nothing happened: 502, and the same key
// resumes), unknown (a timeout or a lost response: the payment becomes
// processing and the client gets 202).
//
// # Unknown outcomes
//
// A processing payment is resolved by whichever comes first: a retry with the
// client's key (it repeats the call under the provider key), a provider
// webhook (ApplyProviderEvent), or the Reconciler (it asks the provider about
// the key, and repeats the call if the provider never saw it). Every
// resolution is a conditional update from pending or processing, so they can
// race freely: the first wins, the others change nothing, and nothing moves a
// final payment backwards. A conflict with a payment in flight is
// ErrPaymentInProgress, which clears, not ErrOrderAlreadyPaid, which is final. The Resolved hook then finishes the client's open
// idempotency record with the final answer.
//
// # Webhooks are hints
//
// A signed webhook event only says who sent it. ApplyProviderEvent asks the
// provider about the payment or refund the event names, by our provider
// key, outside any transaction and bounded in time, and applies what the
// provider says, after checking its amount and currency against ours. An
// event the provider contradicts changes nothing and is not recorded in the
// inbox; one it cannot be asked about is ErrProviderUnreachable (the
// provider delivers it again). A flood of signed events costs the provider
// little: an event id the inbox holds is answered before any lookup,
// concurrent lookups of one provider key share one call, and final answers
// (never "no such call") are held a few seconds (eventlookups.go).
//
// # Abandoned attempts end
//
// A payment or refund that never reached the provider (a 502 never
// retried) would hold its order, or its share of the payment, forever. Its
// last attempt is recorded (LastAttemptAt: its creation, and each retry that
// resumes it, fenced by the retry's recovery point), and the Reconciler
// cancels it after CancelAfter of none, once the provider confirms it has no
// call under the key: with the key's record taken over first (KeyFence), and
// the attempt time re-checked in the cancel's own transaction, which also
// stores the key's answer. Canceled is final; the order is payable again.
//
// # Invariants held by the database
//
// At most one active or succeeded payment per order (a partial unique
// index), one payment or refund per provider key (unique), refunds never
// above the payment (a CHECK, plus the payment row lock under which a refund
// reserves its amount), and each webhook event applied once (the inbox's
// primary key, inserted in the transaction of the effect).
//
// Ids are a prefix and a ULID ("ord_01J...", "pay_...", "re_..."): ordering by
// id is ordering by creation. Errors are the sentinels in errors.go and
// payment.go, wrapped with %w, and the typed *ValidationError and
// *DeclinedError; the HTTP layer maps them to problem+json in one table.
package payments
