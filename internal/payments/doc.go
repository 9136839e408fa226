// Package payments is the domain of the API: orders, customers, payments and
// refunds, their rules and state machines, the Service that runs the use
// cases, and the interfaces the Service consumes (its stores and the payment
// provider). The stores' GORM implementation is package paymentsdb.
//
// The package knows nothing of HTTP nor of SQL. It does know that a caller
// may own a database transaction: every method of paymentsdb works through
// dbtx.Conn, so when the idempotency layer runs a request inside a
// transaction it carries in the context, the order (and its outbox event)
// is written in that same transaction and commits together with the
// idempotency record.
//
// # Payments and refunds run on the core's skeleton
//
// A payment has an effect no transaction can undo: money moves at the
// provider. PayOrder and RefundPayment therefore run on the idempotency
// core's skeleton for outside calls, an idempotency.Effect each
// (chargeEffect in pay.go, refundEffect in refund.go), registered on the
// Keeper by WithOutsideCalls. The core runs the phases; this package says
// what each does to its rows:
//
//  1. phase 1, one transaction: the call's id and provider key, derived
//     from the merchant, the client's Idempotency-Key and the record's
//     lifetime (the core's derive.go), then createPayment (lock the order,
//     insert the payment, pending) or createRefund (lock the payment,
//     reserve the amount);
//  2. phase 2: the core records its intent to call, under the record's
//     fence;
//  3. the call (Send), outside any transaction, under the provider key;
//  4. phase 3, one transaction: the provider's answer checked against ours
//     (checkCharge, checkRefund: amount, currency, key, reference) and
//     applied (applyCharge: the payment, the order, the outbox event;
//     applyRefund: the refund, the payment's refunded amount, the event),
//     with the client's answer stored in the key's record; or the outcome
//     recorded as unknown (the payment processing, 202).
//
// A retry, or a request that takes over a crashed one, resumes from the
// record's recovery point: it never inserts a second payment, and it calls
// the provider again only under the same provider key, which the provider
// honours. A retry whose rows a failover lost derives the same id and key.
//
// # Unknown outcomes
//
// A processing payment is settled by whichever comes first: a retry with
// the client's key, a provider webhook (ApplyProviderEvent, through the
// Effect's Apply), or the core's reconciler, which asks the provider under
// the key and sends the call again if the provider never saw it. Every
// path applies through the same settle of the core, under the call's row
// lock, and every move of a payment is a conditional update from the
// states it may come from: the first wins, nothing moves a final payment
// backwards. A conflict with a payment in flight is ErrPaymentInProgress,
// which clears; ErrOrderAlreadyPaid is final.
//
// # Webhooks are hints
//
// A signed webhook event only says who sent it. ApplyProviderEvent asks the
// provider about the payment or refund the event names, by our provider
// key, outside any transaction and bounded in time, and applies what the
// provider says. An event the provider contradicts changes nothing and is
// not recorded in the inbox; one it cannot be asked about is
// ErrProviderUnreachable (the provider delivers it again). A flood of
// signed events costs the provider little (eventlookups.go).
//
// # Abandoned attempts, orphans and flagged calls
//
// A payment or refund that never reached the provider (a 502 never
// retried) is canceled by the reconciler after PENDING_CANCEL_AFTER, once
// the provider confirms it has no call under the key; canceled is final,
// and the order is payable again. A charge the provider holds for a
// payment that ended canceled or failed is an orphan (orphan.go): refunded
// automatically, through an Effect of its own keyed by the charge, once.
// An answer that fails the money check flags the call for an operator, who
// retries it, accepts it, or fails it (FailFlagged: the payment fails, the
// provider's wrong charge becomes an orphan). Every path that moves a
// payment or a refund writes its outbox event (events.go), and
// RepairEvents writes those that an operator's command once left out.
//
// # Invariants held by the database
//
// At most one active or succeeded payment per order (a partial unique
// index), one payment or refund per provider key (unique), refunds never
// above the payment (a CHECK, plus the payment row lock under which a refund
// reserves its amount), and each webhook event applied once (the inbox's
// primary key, inserted in the transaction of the effect).
//
// Order ids are a prefix and a ULID ("ord_01J..."); payment and refund ids
// are derived, with the same prefix style ("pay_...", "re_..."). Errors are
// the sentinels in errors.go and payment.go, wrapped with %w, and the typed
// *ValidationError and *UnavailableError; the HTTP layer maps them to
// problem+json in one table. A final outcome is a result, not an error: a
// declined or canceled payment comes back as the payment, and the HTTP
// layer answers it from the payment alone.
package payments
