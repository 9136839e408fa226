// Package idemcheck is a black-box conformance checker for an endpoint that
// takes an Idempotency-Key: a catalogue of checks, each with a stable id, the
// rule it holds the endpoint to, where the rule comes from, and its level.
// The command cmd/idemcheck runs it over the network against any team's API;
// Go tests run the very same catalogue against an endpoint served in-process
// (an httptest.Server's URL and Client). There is no second copy of a check.
//
// # Rules, sources and levels
//
// Each check cites its source: a section of the IETF draft
// draft-ietf-httpapi-idempotency-key-header-07, Stripe's documented
// behaviour, or this project's own contract. The level decides what a broken
// rule means:
//
//   - MUST fails the endpoint. These are the draft's MUSTs (a request that
//     reuses a key for another payload, or lacks a required key, is failed:
//     §2.7), and four rules the draft words more softly, or leaves out, but
//     without which the header means nothing, so the checker holds them as
//     requirements: a retry under a key does not execute again (§2, §2.6),
//     N concurrent copies make one effect (§2.6), one client never gets
//     another client's stored answer (§5), and a failure does not lock a
//     key for longer than the endpoint states (this project's contract).
//   - SHOULD (the draft's SHOULDs, Stripe's documented behaviour) and
//     PROJECT (this project's stricter rules: canonical JSON, Retry-After on
//     409, the replay marker) give advice, never a failure.
//   - INFO only reports figures (timings).
//
// No verdict without evidence. Run first sends the request every check is
// built on, under a new key; unless it is answered 2xx (or a status the
// Config declares as the endpoint's own outcome), nothing else is sent and
// Run says what to fix (ErrPreflight). A check whose input is absent (no
// -url-variant, no -body-invalid, no -H2) is not applicable; one whose input
// did not bring about what it checks (no 5xx provoked, a variant route that
// does not exist) is not judged, never passed; a check that could not run
// (the network failed, the effects URL did not answer) is an error, which
// fails a run like a failure does.
//
// # Safe by default
//
// Run computes its Plan first: how many requests, how many effects a correct
// endpoint makes and how many a broken one could make at worst. It sends
// nothing unless Config.AllowEffects is set, refuses a plan larger than
// Config.MaxRequests, counts every request it sends against that limit,
// sends only to the URLs in the Config, never follows a redirect, and never
// retries: the requests are built so that net/http cannot resend them either
// (see newRequest). A report never shows a credential: URLs lose their user
// info and query values (RedactURL), and the credentials the Config sends
// are replaced wherever an answer or an error repeats them.
//
// # Operations and placeholders
//
// Every scenario works on fresh operations: a new key, and the request with
// its placeholders filled. {{unique}} becomes a new random value per
// operation, so that an endpoint with natural keys (one customer per email)
// sees a new request each time. Config.Prepare supplies other placeholders
// per operation, for an endpoint whose operation needs a fresh resource (a
// new order to pay): the Go caller creates it there.
package idemcheck
