package explore_test

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/explore"
)

// How hard TestSchedules looks. `make test` runs the defaults: every
// schedule of each scenario within its bounds (scenarioCase), then 300
// random ones. `make explore` runs every scenario to two preemptions and
// draws 20,000 random schedules each, from a seed it prints.
var (
	randomFlag   = flag.Int("random", 300, "random schedules per scenario, after the exhaustive ones")
	preFlag      = flag.Int("preemptions", 0, "the exhaustive search's bound on preemptions (0: each scenario's own)")
	capFlag      = flag.Int("max-schedules", 1_000_000, "the exhaustive search's cap per scenario")
	firstSeed    = flag.Uint64("first-seed", 1, "the seed of each scenario's first random schedule")
	seedFlag     = flag.String("seed", "", "replay the random schedule of this seed alone (name the scenario with -run)")
	scheduleFlag = flag.String("schedule", "", "replay this schedule alone, as a failure printed it (name the scenario with -run)")
)

// options are the exploration's bounds for a scenario whose own are
// preemptions and faults, as the flags set them.
func options(t *testing.T, preemptions, faults int) explore.Options {
	if *preFlag > 0 {
		preemptions = *preFlag
	}
	opt := explore.Options{
		MaxPreemptions: preemptions, MaxFaults: faults, MaxSchedules: *capFlag,
		Random: *randomFlag, Seed: *firstSeed, RandomPreemptions: 8, RandomFaults: 3, PPreempt: 0.15, PFault: 0.08,
	}
	if testing.Short() {
		// The quick tier: a taste of each scenario, about 10,000 schedules.
		opt.MaxPreemptions, opt.MaxSchedules, opt.Random = 1, min(opt.MaxSchedules, 1000), min(opt.Random, 100)
	}
	switch {
	case *scheduleFlag != "":
		opt.Replay = *scheduleFlag
	case *seedFlag != "":
		seed, err := strconv.ParseUint(*seedFlag, 10, 64)
		if err != nil {
			t.Fatalf("-seed: %v", err)
		}
		opt.Seed, opt.Random, opt.SkipExhaustive = seed, 1, true
	}
	return opt
}

// explored runs sc and fails t with the failing schedule and how to replay
// it; it returns how many schedules ran.
func explored(t *testing.T, c scenarioCase) int {
	t.Helper()
	sc := c.scenario
	opt := options(t, c.preemptions, c.faults)
	res := explore.Explore(sc, opt)
	how := fmt.Sprintf("exhaustive to %d preemptions and %d faults", opt.MaxPreemptions, opt.MaxFaults)
	if !res.Complete && res.Failure == nil {
		how += " (stopped at the cap)"
	}
	t.Logf("%s: %d schedules in %v: %d %s, %d random from seed %d",
		sc.Name, res.Schedules(), res.Elapsed.Round(time.Millisecond), res.Exhaustive, how, res.Random, *firstSeed)
	if f := res.Failure; f != nil {
		replay := "-schedule '" + f.Schedule + "'"
		if f.Random {
			replay = fmt.Sprintf("-seed %d", f.Seed)
		}
		t.Fatalf("scenario %q broke an invariant:\n%s\nreplay: go test -count=1 -run 'TestSchedules/%s$' ./internal/idempotency/explore %s",
			sc.Name, f, sc.Name, replay)
	}
	return res.Schedules()
}

// TestSchedules explores every scenario: the core's protocol under every
// interleaving of its actors within the bounds, with faults, against the
// invariants of explore.World and the shop's money.
func TestSchedules(t *testing.T) {
	total := 0
	for _, sc := range scenarios() {
		t.Run(sc.scenario.Name, func(t *testing.T) { total += explored(t, sc) })
	}
	t.Logf("%d schedules explored in all", total)
}

// scenarioCase is a scenario and the bounds of its exhaustive search in
// `make test`: preemptions and faults. Two preemptions where every such
// schedule fits in the budget, one elsewhere (`make explore` runs two for
// all: 486,604 schedules, about 95 s without the race detector).
type scenarioCase struct {
	scenario            explore.Scenario
	preemptions, faults int
}

func shopOf(w *explore.World) *shop { return w.App.(*shop) }

// withShop is a scenario over a new shop with two instances, brought to
// rest by instance a's reconciler and checked for money too; setup seeds
// more.
func withShop(name string, faults []string, setup func(s *shop), actors ...explore.Actor) explore.Scenario {
	return explore.Scenario{
		Name: name, Faults: faults, Actors: actors,
		Setup: func(w *explore.World) {
			s := newShop(w)
			w.App = s
			if setup != nil {
				setup(s)
			}
		},
		Settle: func(ctx context.Context, w *explore.World) { w.Reconcile(ctx, shopOf(w).a.k) },
		Check:  func(w *explore.World) []string { return shopOf(w).checkMoney() },
	}
}

// act is an actor of the shop.
func act(name string, crashable bool, run func(ctx context.Context, s *shop)) explore.Actor {
	return explore.Actor{Name: name, Crashable: crashable, Run: func(ctx context.Context, w *explore.World) { run(ctx, shopOf(w)) }}
}

// afterLock: long enough for any lock of the actors before to have run out.
const afterLock = explore.LockTimeout + time.Second

var allFaults = []string{"crash", "lost", "late", "down"}

func reconciler(name string, in func(s *shop) *instance, after time.Duration, rounds int) explore.Actor {
	return act(name, true, func(ctx context.Context, s *shop) {
		s.w.Sleep(ctx, after)
		for range rounds {
			_, _ = in(s).k.Reconcile(ctx)
		}
	})
}

func instA(s *shop) *instance { return s.a }
func instB(s *shop) *instance { return s.b }

func scenarios() []scenarioCase {
	const seeded = "pay_seeded"
	paid := func(s *shop) { s.paid(seeded, 2500) }
	return []scenarioCase{
		{preemptions: 1, faults: 1, scenario: withShop("payment", allFaults, nil,
			act("client@a", true, func(ctx context.Context, s *shop) { s.pay(ctx, s.a, "k1", 2500, false) }),
			act("retry@b", true, func(ctx context.Context, s *shop) {
				s.w.Sleep(ctx, afterLock)
				s.pay(ctx, s.b, "k1", 2500, false)
			}),
			reconciler("reconciler@b", instB, afterLock, 1),
		)},
		{preemptions: 1, faults: 1, scenario: withShop("partial refund", allFaults, paid,
			act("client@a", true, func(ctx context.Context, s *shop) { s.refund(ctx, s.a, "r1", seeded, 1000) }),
			act("retry@b", true, func(ctx context.Context, s *shop) {
				s.w.Sleep(ctx, afterLock)
				s.refund(ctx, s.b, "r1", seeded, 1000)
			}),
			reconciler("reconciler@b", instB, afterLock, 1),
		)},
		{preemptions: 1, faults: 1, scenario: withShop("full refund", allFaults, paid,
			act("client@a", true, func(ctx context.Context, s *shop) { s.refund(ctx, s.a, "r1", seeded, 0) }),
			act("retry@b", true, func(ctx context.Context, s *shop) {
				s.w.Sleep(ctx, afterLock)
				s.refund(ctx, s.b, "r1", seeded, 0)
			}),
			reconciler("reconciler@b", instB, afterLock, 1),
		)},
		// A payment whose first call does nothing (the explorer's "down")
		// is abandoned; the reconciler cancels it while a retry resumes it.
		{preemptions: 1, faults: 2, scenario: withShop("cancel", allFaults, nil,
			act("client@a", true, func(ctx context.Context, s *shop) { s.pay(ctx, s.a, "k1", 2500, false) }),
			act("retry@b", true, func(ctx context.Context, s *shop) {
				s.w.Sleep(ctx, explore.CancelAfter+afterLock)
				s.pay(ctx, s.b, "k1", 2500, false)
			}),
			reconciler("reconciler@b", instB, explore.CancelAfter+afterLock, 1),
		)},
		// An unknown outcome: two reconcilers ask and re-send at once.
		{preemptions: 1, faults: 2, scenario: withShop("resend", allFaults, nil,
			act("client@a", true, func(ctx context.Context, s *shop) { s.pay(ctx, s.a, "k1", 2500, false) }),
			reconciler("reconciler@a", instA, afterLock, 2),
			reconciler("reconciler@b", instB, afterLock, 2),
		)},
		// A charge sent around the core for a payment canceled long ago:
		// two reconcilers' late looks and a webhook hear of it at once, and
		// it is refunded once.
		{preemptions: 1, faults: 1, scenario: withShop("orphan", []string{"crash", "lost", "down"}, func(s *shop) { s.orphaned("k1") },
			reconciler("reconciler@a", instA, explore.CancelAfter, 2),
			reconciler("reconciler@b", instB, explore.CancelAfter, 2),
			act("webhook@b", true, func(ctx context.Context, s *shop) {
				if op, err := s.w.Outside.Find(ctx, s.orphanID); err == nil {
					_, _, _ = s.b.pay.Apply(ctx, scope, s.orphanID, op)
				}
			}),
		)},
		// A key used again after its record expired is a new operation:
		// its own payment, under a new provider key, beside the janitor.
		{preemptions: 1, faults: 1, scenario: withShop("reused after ttl", allFaults, nil,
			act("client@a", true, func(ctx context.Context, s *shop) { s.pay(ctx, s.a, "k1", 2500, false) }),
			act("janitor@a", true, func(ctx context.Context, s *shop) {
				s.w.Sleep(ctx, explore.TTL+time.Minute)
				_, _ = s.w.Store.PurgeExpired(ctx, s.w.Clock.Now(), 500)
			}),
			act("client@b", true, func(ctx context.Context, s *shop) {
				s.w.Sleep(ctx, explore.TTL+time.Minute)
				s.pay(ctx, s.b, "k1", 2500, false)
			}),
		)},
		// Webhooks announce every executed call, delivered beside the
		// request and the reconciler.
		{preemptions: 2, faults: 1, scenario: withShop("webhooks", allFaults, func(s *shop) { s.w.Outside.OnExecute = s.announce },
			act("client@a", true, func(ctx context.Context, s *shop) { s.pay(ctx, s.a, "k1", 2500, false) }),
			reconciler("reconciler@b", instB, afterLock, 1),
		)},
		// Atomic: the order and its record commit together, on either
		// instance, once.
		{preemptions: 2, faults: 1, scenario: withShop("atomic", []string{"crash"}, nil,
			act("client@a", true, func(ctx context.Context, s *shop) { s.createOrder(ctx, s.a, "o1") }),
			act("client@b", true, func(ctx context.Context, s *shop) { s.createOrder(ctx, s.b, "o1") }),
			act("retry@a", true, func(ctx context.Context, s *shop) {
				s.w.Sleep(ctx, time.Second)
				s.createOrder(ctx, s.a, "o1")
			}),
		)},
	}
}

// orphaned seeds a payment under key that the reconciler canceled (it never
// reached the outside service), whose late look is due at CancelAfter, and
// a charge for it sent around the core since.
func (s *shop) orphaned(key string) {
	ctx := context.Background()
	now := s.w.Clock.Now()
	id := "pay_orphaned"
	s.orphanID = id
	_ = s.payments.Insert(ctx, scope, id, payment{Scope: scope, ID: id, Amount: 2500, Status: "canceled"})
	_ = s.w.Store.InsertCall(ctx, &idempotency.Call{
		Scope: scope, ID: id, Kind: "payment", ClientKey: key, Key: id, KeyVersion: 1, State: idempotency.CallCanceled,
		AttemptedAt: now, DueAt: now.Add(explore.CancelAfter), CreatedAt: now, UpdatedAt: now,
	})
	answer := answerOf(id, "canceled", map[string]int{"canceled": 409})
	rec := &idempotency.Record{
		Scope: scope, Key: key, Method: "POST", Path: "/orders/ord_1/payments", Fingerprint: "seeded",
		State: idempotency.StateCompleted, Point: "payment_created:" + id, Answer: &answer,
		LockedUntil: now, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(explore.TTL),
	}
	_ = s.w.Store.Insert(ctx, rec)
	s.w.Outside.Send(explore.Request{Kind: "charge", Key: id, Ref: id, Amount: 2500})
}
