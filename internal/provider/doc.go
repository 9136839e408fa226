// Package provider is a mock payment service provider (PSP) and the client the
// payments service uses to talk to it.
//
// # The provider
//
// A Server answers the small HTTP API of a card processor: create a charge,
// create a refund, and look either up by the idempotency key it was made
// under or by the caller's reference. Its ledger lives in memory behind one
// mutex, so every decision about a key (replay it, reject it, or act) is
// taken atomically: two requests with one key can never both charge.
//
// The provider honours Idempotency-Key the way real PSPs do. The first
// request under a key that has an effect binds the key to that request; the
// same request again gets the same object back (201, header
// Idempotent-Replayed: true) and nothing happens twice; a different request
// under the key is 422 idempotency_key_reused. Requests that fail before any
// effect (400 validation errors, 404, the 503 of an outage) bind nothing, so
// the caller may send the key again. A refund larger than what is left of
// its charge is not refused but made with status failed: a final outcome
// bound to its key like any other.
//
// # Faults on demand
//
// The point of the mock is to make the hard cases easy to produce. The test
// payment methods (MethodCardVisa and friends) pick a business outcome, and
// the MethodFault* ones pick a failure, each deterministic per idempotency
// key: the first request under a key misbehaves, later ones answer normally
// at once. That is exactly the sequence a client meets when it retries with
// the same key, which is what the payments service must get right:
//
//   - a lost response: the charge is made but the answer never comes, so the
//     caller cannot tell whether it happened and must find out (retry with
//     the same key, GET by key, or wait for the webhook);
//   - an outage (503): nothing happened, so trying again is safe;
//   - a slow answer: the charge is visible at once, the answer comes late.
//
// GET /v1/ledger lists every charge and refund made, for a fault harness
// (tools/chaos) that compares the whole ledger with the API's database.
//
// Config.Chaos applies the same faults at random rates to ordinary requests,
// for load tests; its random source is injectable so a test sees the same
// faults on every run.
//
// # Webhooks
//
// When Config.WebhookURL is set, every charge made and every refund that
// succeeds is announced as an Event, signed with HMAC-SHA256 in the
// Provider-Signature header (see Sign and VerifySignature, which the API's
// webhook handler reuses). Delivery is at least once: failures are retried
// with backoff, and some events are sent twice on purpose, so the receiver
// has to deduplicate by event id.
//
// # The client
//
// Client is the other side: what the payments service calls. Its whole job
// is to sort every failure into one of three kinds, because each calls for a
// different reaction:
//
//   - ErrNotExecuted: nothing happened (connection refused, 503, breaker
//     open); retrying is safe and cannot double-charge.
//   - ErrUnknownOutcome: the request may or may not have taken effect
//     (timeout, connection lost, other 5xx); only a retry under the same key
//     or a lookup by key can settle it.
//   - a definitive answer: a Charge or Refund (declines included) with a nil
//     error, or an *APIError for a 4xx.
//
// A circuit breaker counts the first two kinds and, when the provider keeps
// failing, fails calls fast with ErrCircuitOpen (which is also
// ErrNotExecuted) instead of piling more requests onto it.
//
// # One breaker per merchant
//
// The breaker belongs to the provider's health, not to one merchant's
// traffic. What a merchant sends (its payment methods, its amounts, its
// account at the provider) decides much of what the provider answers, so
// one merchant whose calls keep failing says little about the provider for
// everyone else; with a single breaker, twenty failing payments of one
// merchant made every merchant's payments fail for as long as it stayed
// open. So a Client keeps a breaker per merchant, named by the call's
// context (WithMerchant), and one more for the calls that name none (the
// lookups by key of the reconciler and the webhook, which no merchant's
// request shapes). One merchant's failures open its own breaker; the others
// go on.
//
// The breakers are bounded (BreakerSettings.Merchants): a merchant beyond
// the bound takes the place of the least recently used, a closed one first,
// so that an open breaker is not forgotten while its merchant keeps
// failing. The price of isolation: a provider down for everyone trips each
// active merchant's breaker on its own, after Failures calls of that
// merchant, a little more load than one shared breaker would let through.
// OnStateChange hears every transition with its merchant, for the log line
// and the metric, and OpenBreakers counts those open for readiness.
package provider
