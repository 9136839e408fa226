package idemcheck

// Level says what breaking a check's rule means for the endpoint.
type Level string

// The levels, strongest first. Only MUST fails an endpoint.
const (
	// Must: a requirement; breaking it fails the run.
	Must Level = "MUST"
	// Should: the draft's SHOULDs and Stripe's documented behaviour; advice.
	Should Level = "SHOULD"
	// Project: this project's own stricter rule; advice.
	Project Level = "PROJECT"
	// Info: figures only, never a failure.
	Info Level = "INFO"
)

// The draft every check cites by section.
const Draft = "draft-ietf-httpapi-idempotency-key-header-07"

// The checks' ids: stable, so that CI configurations and tests can name them.
const (
	KeyMissing           = "key-missing"
	KeyInvalid           = "key-invalid"
	FirstRequest         = "first-request"
	ReplayEffect         = "replay-effect"
	ReplaySame           = "replay-same"
	ReplayMarked         = "replay-marked"
	ReuseBody            = "reuse-body"
	ReuseLoose           = "reuse-loose"
	ReusePath            = "reuse-path"
	ReuseMethod          = "reuse-method"
	FingerprintCanonical = "fingerprint-canonical"
	Concurrent           = "concurrent"
	Credentials          = "credentials"
	NoBurn               = "no-burn"
	No5xxReplay          = "no-5xx-replay"
	NoCrashLock          = "no-crash-lock"
	ReplayErrorType      = "replay-error-type"
	PauseReplay          = "pause-replay"
	ExpiryRace           = "expiry-race"
	Timing               = "timing"
)

// Check is one entry of the catalogue: what the endpoint is held to, and why.
type Check struct {
	// ID is stable and unique.
	ID string `json:"id"`
	// Rule is the rule, in one sentence.
	Rule string `json:"rule"`
	// Source is where the rule comes from: a section of the draft, Stripe's
	// documentation, or this project's contract.
	Source string `json:"source"`
	// Level is the rule's level; a check may also give advice at a lower
	// level (a missing key refused, but not with 400, is advice).
	Level Level `json:"level"`
	// Needs names the input without which the check is not applicable;
	// empty when it always applies.
	Needs string `json:"needs,omitempty"`
}

// catalogue is every check, in the order they run and are reported.
var catalogue = []Check{
	{
		ID:     KeyMissing,
		Rule:   "A request without a key, to an operation that requires one, is refused as the client's error (400 with a problem body) and changes nothing.",
		Source: "draft-07 §2.7: the resource MUST fail the request; 400 with a problem body SHOULD",
		Level:  Must,
	},
	{
		ID:     KeyInvalid,
		Rule:   "A key that is empty, longer than 255 characters, or holds characters outside visible ASCII is refused (4xx) and changes nothing.",
		Source: "draft-07 §2.1 (the key is a Structured Field String) and §5 (validate the key against its published format); Stripe: keys are up to 255 characters",
		Level:  Should,
	},
	{
		ID:     FirstRequest,
		Rule:   "A request under a new key is processed normally and answered 2xx; every other check builds on it.",
		Source: "draft-07 §2.6 (first time request)",
		Level:  Should,
	},
	{
		ID:     ReplayEffect,
		Rule:   "The same request again under the same key does not execute again: its answer names the same resource, and no new effect is counted.",
		Source: "draft-07 §2 and §2.6 (the key lets the resource recognise a retry of the same request), with RFC 9110 §9.2.2",
		Level:  Must,
	},
	{
		ID:     ReplaySame,
		Rule:   "The repeat gets the stored answer: the same status, a byte-identical body, the same Content-Type and Location, and no other ETag (a replay may leave the validator out, since the resource may have changed).",
		Source: "draft-07 §2.6 (respond with the result of the previously completed operation); Stripe: the status code and body of the first request are saved and returned",
		Level:  Should,
	},
	{
		ID:     ReplayMarked,
		Rule:   "A replayed answer carries Idempotent-Replayed: true, and a first answer does not.",
		Source: "this project's contract, Idempotency 4",
		Level:  Project,
	},
	{
		ID:     ReuseBody,
		Rule:   "The same key with another body is refused with 422 and changes nothing: no effect, and the original request still gets its own answer.",
		Source: "draft-07 §2.7: the resource MUST fail the request; 422 SHOULD; Stripe: the parameters are compared with the original's, and an error answers a difference",
		Level:  Must,
		Needs:  "-body-variant",
	},
	{
		ID:     ReuseLoose,
		Rule:   `A body that differs from the original only in loosely equal values (a number sent as a string, 0 as "", 1 as true) is another request: under the same key it is refused (422, or 400 for its own invalidity), never answered with the original's result.`,
		Source: "draft-07 §2.7 (a key reused for a different payload MUST fail); this project's contract, Idempotency 2 (any value changes the fingerprint)",
		Level:  Must,
		Needs:  "a body with a number, true or false (the checker makes the variants)",
	},
	{
		ID:     ReusePath,
		Rule:   "The same key and body on another path of the API is refused with 422, and the original request still gets its own answer; a 4xx counts only where a route serves that path, as the same request without a key shows.",
		Source: "this project's contract, Idempotency 2 (the fingerprint covers method, route and path); the draft leaves the key's scope to the resource (§2.2)",
		Level:  Project,
		Needs:  "-url-variant",
	},
	{
		ID:     ReuseMethod,
		Rule:   "The same key and body with another method is refused (4xx), and the original request still gets its own answer; a 4xx counts only where a route serves that method, as the same request without a key shows.",
		Source: "this project's contract, Idempotency 2 (the fingerprint covers method, route and path)",
		Level:  Project,
		Needs:  "-method-variant",
	},
	{
		ID:     FingerprintCanonical,
		Rule:   "Adding whitespace to the body, or reordering its members, does not change the request: each such repeat, one change at a time, is a replay, not a 422.",
		Source: "this project's contract, Idempotency 2 (the fingerprint is over canonical JSON, RFC 8785)",
		Level:  Project,
		Needs:  "a JSON object body with two members or more",
	},
	{
		ID:     Concurrent,
		Rule:   "N copies of one request sent at once under one new key make one effect: every 2xx names the same resource, one new effect is counted, and the other copies get 409 with Retry-After or the replay.",
		Source: "draft-07 §2.6 and §2.7 (a concurrent retry gets 409, SHOULD); Retry-After on 409 is this project's rule",
		Level:  Must,
	},
	{
		ID:     Credentials,
		Rule:   "The same key and request under other credentials is another client's operation: it never gets the first client's answer, and does not replace it.",
		Source: "draft-07 §5 (the lookup key combines the client's key with client attributes, so that one client cannot read another's entries); this project's contract, Idempotency 1",
		Level:  Must,
		Needs:  "-H2",
	},
	{
		ID:     NoBurn,
		Rule:   "A request refused by validation (4xx, nothing executed) does not use up its key: the corrected request under the same key then succeeds.",
		Source: "Stripe: no idempotent result is saved when a request fails validation; draft-07 §2.7 (clients correct the request before retrying); this project's contract, Idempotency 3",
		Level:  Should,
		Needs:  "-body-invalid",
	},
	{
		ID:     No5xxReplay,
		Rule:   "A 5xx answer is not stored: the same request again under the key executes or resumes instead of getting the 5xx back; when it fails the same way again, the valid body under the key tells a stored 5xx from a new one.",
		Source: "this project's contract, Idempotency 3 (Stripe differs: it documents that it replays 500s)",
		Level:  Project,
		Needs:  "-body-5xx",
	},
	{
		ID:     NoCrashLock,
		Rule:   "A request whose handler fails before answering (the -body-5xx body) does not lock its key: the same key then executes, refuses, or answers 409 with a Retry-After that ends within the lock timeout the endpoint states (-lock-timeout).",
		Source: "this project's contract, Idempotency 3 (after a 5xx the key may be sent again) and 6 (a record left running is recovered after IDEMPOTENCY_LOCK_TIMEOUT); the draft only advises 409 while a request is in progress (§2.7)",
		Level:  Must,
		Needs:  "-body-5xx",
	},
	{
		ID:     ReplayErrorType,
		Rule:   "An error answer the endpoint stores is replayed with its Content-Type (a problem stays application/problem+json), as a stored answer keeps the headers that describe it.",
		Source: "draft-07 §2.6 (respond with the result of the previously completed operation); this project's contract, Idempotency 3 and 4 (the stored headers that describe the result)",
		Level:  Should,
		Needs:  "-body-invalid or -body-5xx",
	},
	{
		ID:     PauseReplay,
		Rule:   "A replay still names the same resource after a pause of a few seconds: the record outlives the request and any in-memory cache.",
		Source: "draft-07 §2.3 (keys expire by a published policy) and §2.6",
		Level:  Must,
	},
	{
		ID:     ExpiryRace,
		Rule:   "Once the key has expired (-ttl after its first answer), N copies of its request sent at once make one effect at most: one executes as a new operation, or none does (a tombstone refuses them), never two.",
		Source: "draft-07 §2.3 (a key is valid for a time the resource publishes) and §2.6; this project's contract, Idempotency 7 (an expired record is treated as absent, or refused with tombstones)",
		Level:  Must,
		Needs:  "-ttl",
	},
	{
		ID:     Timing,
		Rule:   "Figures only: how long the first request took, and the median of five replays.",
		Source: "informational",
		Level:  Info,
	},
}

// Checks returns the catalogue, in the order the checks run.
func Checks() []Check {
	return append([]Check(nil), catalogue...)
}

// Lookup returns the check with this id.
func Lookup(id string) (Check, bool) {
	for _, c := range catalogue {
		if c.ID == id {
			return c, true
		}
	}
	return Check{}, false
}
