package explore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/explore"
)

// The explorer must be able to fail. Each planted defect is a store that
// breaks its contract in one way a store or a fork could (the core is the
// real one); the explorer, with the budget TestSchedules has and nothing
// told of where to look, must find a schedule that breaks an invariant.

// lastRoundStore is the store before the stale-point fix: a takeover hands
// over the recovery point the taker read before it, not the one it took;
// and calls are counted across every lifetime of the key, so a record that
// made its call already derives a new id instead of finding it.
type lastRoundStore struct {
	idempotency.Store
	mu   sync.Mutex
	read map[string]string // the point each reader saw, by key and fence
}

func (s *lastRoundStore) seen(scope, key string, fence int64) string {
	return scope + "\x00" + key + "\x00" + time.Duration(fence).String()
}

func (s *lastRoundStore) Get(ctx context.Context, scope, key string, now time.Time) (*idempotency.Record, error) {
	rec, err := s.Store.Get(ctx, scope, key, now)
	if err == nil {
		s.mu.Lock()
		s.read[s.seen(scope, key, rec.Fence)] = rec.Point
		s.mu.Unlock()
	}
	return rec, err
}

func (s *lastRoundStore) TakeOver(ctx context.Context, scope, key string, seen int64, now, lockedUntil time.Time) (*idempotency.Record, error) {
	rec, err := s.Store.TakeOver(ctx, scope, key, seen, now, lockedUntil)
	if err == nil {
		s.mu.Lock()
		if p, ok := s.read[s.seen(scope, key, seen)]; ok {
			rec.Point = p
		}
		s.mu.Unlock()
	}
	return rec, err
}

func (s *lastRoundStore) CountCalls(ctx context.Context, scope, clientKey, kind string, _ time.Time) (int, error) {
	return s.Store.CountCalls(ctx, scope, clientKey, kind, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
}

// noIntentStore never records an intent: a call about to be sent is saved
// as ready (last round's break: a provider call with no recorded intent).
type noIntentStore struct{ idempotency.Store }

func (s noIntentStore) SaveCall(ctx context.Context, c *idempotency.Call) error {
	if c.State == idempotency.CallCalling {
		ready := *c
		ready.State, ready.IntentFence = idempotency.CallReady, 0
		return s.Store.SaveCall(ctx, &ready)
	}
	return s.Store.SaveCall(ctx, c)
}

// expiredIntentStore treats an intent whose owner's lock has run out as
// abandoned: it reports the call ready, so the reconciler may cancel it
// while its owner, paused, may still send.
type expiredIntentStore struct {
	idempotency.Store
	clock *explore.Clock
}

func (s expiredIntentStore) lie(c *idempotency.Call) {
	if c.State == idempotency.CallCalling && !c.IntentAt.Add(explore.LockTimeout).After(s.clock.Now()) {
		c.State, c.IntentFence = idempotency.CallReady, 0
	}
}

func (s expiredIntentStore) LockCall(ctx context.Context, scope, id string) (*idempotency.Call, error) {
	c, err := s.Store.LockCall(ctx, scope, id)
	if err == nil {
		s.lie(c)
	}
	return c, err
}

func (s expiredIntentStore) ClaimDue(ctx context.Context, now, until time.Time, limit, perScope int) ([]idempotency.Call, error) {
	calls, err := s.Store.ClaimDue(ctx, now, until, limit, perScope)
	for i := range calls {
		s.lie(&calls[i])
	}
	return calls, err
}

// planted is sc with every instance's store wrapped by wrap.
func planted(sc explore.Scenario, wrap func(w *explore.World, s idempotency.Store) idempotency.Store) explore.Scenario {
	setup := sc.Setup
	sc.Setup = func(w *explore.World) {
		w.Wrap = func(s idempotency.Store) idempotency.Store { return wrap(w, s) }
		setup(w)
	}
	return sc
}

func TestSchedulesFindPlantedDefects(t *testing.T) {
	if testing.Short() {
		t.Skip("the full tier's: about 30 s with the race detector")
	}
	cases := []struct {
		defect, scenario string
		faults           int
		wrap             func(w *explore.World, s idempotency.Store) idempotency.Store
		// want is a broken invariant's name, as its problem starts.
		want []string
	}{
		{"a takeover resumes from a point read before it (last round's store)", "partial refund", 1,
			func(_ *explore.World, s idempotency.Store) idempotency.Store {
				return &lastRoundStore{Store: s, read: map[string]string{}}
			}, []string{"one-effect"}},
		{"a call sent with no recorded intent", "cancel", 2,
			func(_ *explore.World, s idempotency.Store) idempotency.Store { return noIntentStore{s} }, []string{"no-orphan", "not-executed"}},
		{"a cancel while an intent is open", "cancel", 2,
			func(w *explore.World, s idempotency.Store) idempotency.Store {
				return expiredIntentStore{Store: s, clock: w.Clock}
			}, []string{"no-orphan", "not-executed"}},
	}
	for _, tc := range cases {
		t.Run(tc.defect, func(t *testing.T) {
			sc := planted(scenarioNamed(t, tc.scenario), tc.wrap)
			// The budget of the whole search: every schedule to two
			// preemptions (within 30,000), then random ones.
			opt := options(t, 2, tc.faults)
			opt.MaxSchedules = min(opt.MaxSchedules, 30_000)
			res := explore.Explore(sc, opt)
			require.NotNil(t, res.Failure, "%d schedules of %q ran, none broke an invariant", res.Schedules(), tc.scenario)
			f := res.Failure
			how := "schedule " + f.Schedule
			if f.Random {
				how = "random seed " + time.Duration(f.Seed).String()
			}
			t.Logf("found after %d schedules (%v), %s:\n  %s", res.Schedules(), res.Elapsed.Round(time.Millisecond), how,
				strings.Join(f.Problems, "\n  "))
			name, _, _ := strings.Cut(f.Problems[0], ":")
			require.Contains(t, tc.want, name, "found instead: %s", f.Problems[0])
		})
	}
}

// TestStalePointScheduleBreaksLastRoundsStore: the named test's schedule
// (TestTakeoverResumesFromThePointItTakes) reaches the seam: on last
// round's store it makes two refunds.
func TestStalePointScheduleBreaksLastRoundsStore(t *testing.T) {
	sc := planted(scenarioNamed(t, "partial refund"), func(_ *explore.World, s idempotency.Store) idempotency.Store {
		return &lastRoundStore{Store: s, read: map[string]string{}}
	})
	res := explore.Explore(sc, explore.Options{Script: stalePointSteps})
	require.NotNil(t, res.Failure)
	require.Contains(t, res.Failure.Problems[0], "one-effect: 2 effects")
}
