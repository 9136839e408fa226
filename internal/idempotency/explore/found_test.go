package explore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency/explore"
)

// The schedules the explorer found broken, each directed step by step as a
// named test of its own, beside the fix that mended it. A step runs one
// actor until it is parked before the move its Until names.

// scenarioNamed is the scenario of TestSchedules with that name.
func scenarioNamed(t *testing.T, name string) explore.Scenario {
	t.Helper()
	for _, sc := range scenarios() {
		if sc.scenario.Name == name {
			return sc.scenario
		}
	}
	t.Fatalf("no scenario %q", name)
	return explore.Scenario{}
}

// directed runs sc along steps and fails t with what broke, if anything.
func directed(t *testing.T, sc explore.Scenario, steps ...explore.Step) {
	t.Helper()
	res := explore.Explore(sc, explore.Options{Script: steps})
	if res.Failure != nil {
		t.Fatalf("%s:\n%s", sc.Name, res.Failure)
	}
}

// TestTakeoverResumesFromThePointItTakes is the red team's break, found by
// the explorer in "partial refund" (and "payment", "full refund"): a retry
// reads the record at "started" after the owner's lock ran out; the owner,
// slow but alive, then commits its refund and sends it; the retry's
// takeover succeeds (a checkpoint does not move the fence) and resumed
// from the point it had read: a second refund under a new derived key, two
// refunds for one request, the key replaying one of them. A full refund
// stored 409 refund_exceeds_payment while a refund was made.
//
// Fixed twice over: TakeOver returns the record as it moved it, so the
// retry resumes from the point it took; and a call's id is derived from the
// record's lifetime, so even a stale point finds the call its record made.
func TestTakeoverResumesFromThePointItTakes(t *testing.T) {
	for _, name := range []string{"partial refund", "full refund", "payment"} {
		t.Run(name, func(t *testing.T) { directed(t, scenarioNamed(t, name), stalePointSteps...) })
	}
}

// stalePointSteps is TestTakeoverResumesFromThePointItTakes's schedule.
var stalePointSteps = []explore.Step{
	{Actor: "client@a", Until: "begin"},    // reserved; phase 1 next
	{Actor: "retry@b", Until: "take over"}, // past the lock, read "started"
	{Actor: "client@a", Until: "send"},     // phase 1 and the intent committed
	{Actor: "client@a", Until: "begin"},    // sent and answered; phase 3 next
	{Actor: "retry@b", Until: ""},          // takes over
	{Actor: "client@a", Outcome: "crash"},  // dies before phase 3
}

// TestStaleOwnerCannotWriteIntoTheKeysNextRecord, found in "reused after
// ttl": an owner stalled past its record's TTL after its charge was
// answered; the janitor purged the record and the key was used again for a
// new payment; the stale owner's phase 3 then stored its answer into the
// new record, whose fence, starting at 1 again, was its own. The new
// payment's charge was made and the key replayed the old one.
//
// Fixed: a record's first fence is its creation time in microseconds, so
// fences grow across a key's records even when nothing remembers the old.
func TestStaleOwnerCannotWriteIntoTheKeysNextRecord(t *testing.T) {
	directed(t, scenarioNamed(t, "reused after ttl"),
		explore.Step{Actor: "client@a", Until: "begin"},   // reserved
		explore.Step{Actor: "client@a", Until: "send"},    // phase 1
		explore.Step{Actor: "client@a", Until: "begin"},   // charged and answered: phase 3 next
		explore.Step{Actor: "janitor@a", Until: ""},       // a day later: sleep,
		explore.Step{Actor: "janitor@a", Until: ""},       // purge
		explore.Step{Actor: "client@b", Until: "sleep"},   // a day later,
		explore.Step{Actor: "client@b", Until: "begin"},   // the key again: reserved
		explore.Step{Actor: "client@b", Until: "send"},    // a new payment
		explore.Step{Actor: "client@b", Until: "begin"},   // charged and answered
		explore.Step{Actor: "client@b", Outcome: "crash"}, // dies before phase 3
		explore.Step{Actor: "client@a", Until: ""},        // the stale owner's phase 3
	)
}

// TestAnswerIsStoredWhenAWebhookSettlesACallAnotherHolds, found in
// "webhooks": a request charged and crashed before phase 3; the reconciler
// claimed the record and asked; the charge's webhook then settled the call
// without the record (the reconciler's claim held it), and the reconciler,
// finding the call settled, released the record: it stayed executing with
// its outcome known and no answer stored, and nothing was due to store it.
//
// Fixed: a call settled while another held its record stays due, and the
// reconciler stores its answer once that hold has ended.
func TestAnswerIsStoredWhenAWebhookSettlesACallAnotherHolds(t *testing.T) {
	directed(t, scenarioNamed(t, "webhooks"),
		explore.Step{Actor: "client@a", Until: "begin"},           // reserved
		explore.Step{Actor: "client@a", Until: "send"},            // phase 1, intent
		explore.Step{Actor: "client@a", Until: "begin"},           // charged and answered
		explore.Step{Actor: "client@a", Outcome: "crash"},         // dies before phase 3
		explore.Step{Actor: "reconciler@b", Until: "find"},        // claims the record, asks
		explore.Step{Actor: "webhook charge 5VSA", Until: "find"}, // the webhook arrives
		explore.Step{Actor: "webhook charge 5VSA", Until: ""},     // and settles the call
	)
}

// TestDirectedStepsAreFollowed: a script that names an actor that cannot
// move is refused, not silently ignored.
func TestDirectedStepsAreFollowed(t *testing.T) {
	res := explore.Explore(scenarioNamed(t, "payment"), explore.Options{Script: []explore.Step{
		{Actor: "nobody", Until: "begin"},
	}})
	require.NotNil(t, res.Failure)
	require.Contains(t, res.Failure.Problems[0], "script: nobody")
}
