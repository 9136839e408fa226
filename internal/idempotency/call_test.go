package idempotency

import (
	"testing"
	"time"
)

// TestCallMoves is the state machine of an outside call as a table: every
// state and event, and what the fence of the one who moves changes.
func TestCallMoves(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const mine, theirs = 7, 6
	cases := []struct {
		name   string
		from   CallState
		intent int64 // the fence of the open intent, for calling
		ev     callEvent
		fence  int64
		want   CallState // "" when the move is refused
	}{
		{"an owner opens its intent", CallReady, 0, eventIntent, mine, CallCalling},
		{"its call did nothing: back to ready", CallCalling, mine, eventNotExecuted, mine, CallReady},
		{"another owner's call did nothing: refused", CallCalling, theirs, eventNotExecuted, mine, ""},
		{"an intent over another owner's: unknown", CallCalling, theirs, eventIntent, mine, CallUnknown},
		{"its call may have happened", CallCalling, mine, eventUnknown, mine, CallUnknown},
		{"the reconciler finds the owner gone", CallCalling, theirs, eventUnknown, 0, CallUnknown},
		{"unknown stays unknown on a new intent", CallUnknown, 0, eventIntent, mine, CallUnknown},
		{"unknown never goes back to ready", CallUnknown, 0, eventNotExecuted, mine, CallUnknown},
		{"an answer settles it", CallUnknown, 0, eventAnswered, 0, CallDone},
		{"an answer to a ready call (found by a lookup)", CallReady, 0, eventAnswered, 0, CallDone},
		{"a mismatch flags it", CallCalling, mine, eventMismatch, 0, CallFlagged},
		{"cancel only from ready", CallReady, 0, eventCancel, 0, CallCanceled},
		{"never cancel an intent", CallCalling, theirs, eventCancel, 0, ""},
		{"never cancel an unknown outcome", CallUnknown, 0, eventCancel, 0, ""},
		{"done is done", CallDone, 0, eventAnswered, 0, ""},
		{"canceled is final", CallCanceled, 0, eventIntent, mine, ""},
		{"flagged waits for an operator", CallFlagged, 0, eventAnswered, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Call{State: tc.from, IntentFence: tc.intent, DueAt: now}
			err := c.move(tc.ev, tc.fence, now)
			if tc.want == "" {
				if err != errNoMove {
					t.Fatalf("move %s from %s: want refused, got %v (%s)", tc.ev, tc.from, err, c.State)
				}
				return
			}
			if err != nil || c.State != tc.want {
				t.Fatalf("move %s from %s: want %s, got %s (%v)", tc.ev, tc.from, tc.want, c.State, err)
			}
			switch {
			case c.State == CallCalling && (c.IntentFence != tc.fence || !c.IntentAt.Equal(now)):
				t.Fatalf("an intent records its owner's fence and time: %+v", c)
			case c.State != CallCalling && c.IntentFence != 0:
				t.Fatalf("only calling holds an intent: %+v", c)
			case c.State.settled() && !c.DueAt.IsZero():
				t.Fatalf("a settled call is due no more: %+v", c)
			}
		})
	}
}

// TestDeriveID: the same operation derives the same id whoever asks, and
// anything that makes it another operation (scope, key, kind, generation,
// secret) another id of the same shape.
func TestDeriveID(t *testing.T) {
	secret := []byte("test-secret")
	id := deriveID(secret, "pay_", "m1", "key-1", "payment", 0)
	if len(id) != len("pay_")+26 || id[:4] != "pay_" {
		t.Fatalf("shape: %q", id)
	}
	if again := deriveID(secret, "pay_", "m1", "key-1", "payment", 0); again != id {
		t.Fatalf("not deterministic: %q %q", id, again)
	}
	others := map[string]string{
		"scope":      deriveID(secret, "pay_", "m2", "key-1", "payment", 0),
		"key":        deriveID(secret, "pay_", "m1", "key-2", "payment", 0),
		"kind":       deriveID(secret, "pay_", "m1", "key-1", "refund", 0),
		"generation": deriveID(secret, "pay_", "m1", "key-1", "payment", 1),
		"secret":     deriveID([]byte("other"), "pay_", "m1", "key-1", "payment", 0),
		// Length prefixes: moving a byte from one part to the next is
		// another operation.
		"boundary": deriveID(secret, "pay_", "m1k", "ey-1", "payment", 0),
	}
	for what, other := range others {
		if other == id {
			t.Fatalf("another %s derives the same id %q", what, id)
		}
	}
}
