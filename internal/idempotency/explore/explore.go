package explore

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

// The settings every world's Keepers run with. The lock and the cancel are
// short so that a scenario's sleeps stay readable; waiting is off (a
// duplicate that finds its original running answers in progress at once),
// because the Keeper waits on the wall clock, which the explorer does not
// own: a client's retry is an actor's next request instead.
const (
	LockTimeout = 30 * time.Second
	CancelAfter = 2 * time.Minute
	TTL         = 24 * time.Hour
)

// Scenario is a small story the explorer tells every way it can: a few
// actors (requests on two instances, a reconciler, a janitor, a webhook)
// over one store and one outside service.
type Scenario struct {
	Name string
	// Setup builds the world before any actor moves: its instances (World
	// Keeper), the application's rows. It runs outside the scheduler.
	Setup func(w *World)
	// Actors move concurrently, as the scheduler picks.
	Actors []Actor
	// Faults the explorer may pick: "crash" (a crashable actor's process
	// dies where it stands), and the outside service's "lost", "late",
	// "down" and "wrong" (see Outside).
	Faults []string
	// Settle runs once every actor has ended, with no fault and no choice
	// (one actor): it brings the world to rest, as time and the reconciler
	// would (World.Reconcile).
	Settle func(ctx context.Context, w *World)
	// Check returns what is wrong with the world at rest, beside the
	// core's own invariants (World.check): the application's.
	Check func(w *World) []string
}

// Actor is one actor of a scenario.
type Actor struct {
	Name string
	// Crashable: the explorer may crash its process at any of its moves.
	Crashable bool
	Run       func(ctx context.Context, w *World)
}

// Options bound a scenario's exploration.
type Options struct {
	// Every schedule with at most MaxPreemptions preemptions and MaxFaults
	// faults is run, up to MaxSchedules of them.
	MaxPreemptions, MaxFaults, MaxSchedules int
	// Random schedules follow, drawn from seeds Seed, Seed+1, …: each pick
	// preempts with probability PPreempt and faults with PFault, within
	// RandomPreemptions and RandomFaults.
	Random                          int
	Seed                            uint64
	RandomPreemptions, RandomFaults int
	PPreempt, PFault                float64
	// Replay runs one schedule alone: its picks as a failure printed them.
	// With Random 1 and no Replay, only the seed Seed runs.
	Replay string
	// Script runs one schedule alone, directed step by step (a named
	// test's interleaving), then as the first alternatives go.
	Script []Step
	// SkipExhaustive runs the random schedules alone.
	SkipExhaustive bool
}

// Result is what the exploration of one scenario found.
type Result struct {
	Scenario string
	// Exhaustive is how many schedules the exhaustive search ran, and
	// Complete whether it ran all of them within the bounds.
	Exhaustive int
	Complete   bool
	Random     int
	Elapsed    time.Duration
	// Failure is the first schedule that broke an invariant, if any.
	Failure *Failure
}

// Schedules is how many schedules ran.
func (r Result) Schedules() int { return r.Exhaustive + r.Random }

// Failure is a schedule that broke an invariant, and how to run it again.
type Failure struct {
	// Schedule is its picks (-schedule); Seed, for a random one, the seed
	// that drew them (-seed).
	Schedule string
	Seed     uint64
	Random   bool
	Trace    []string
	Problems []string
}

func (f *Failure) String() string {
	var b bytes.Buffer
	for _, p := range f.Problems {
		fmt.Fprintf(&b, "  - %s\n", p)
	}
	fmt.Fprintf(&b, "  schedule: %s", f.Schedule)
	if f.Random {
		fmt.Fprintf(&b, " (random, seed %d)", f.Seed)
	}
	b.WriteString("\n  moves:\n")
	for i, m := range f.Trace {
		fmt.Fprintf(&b, "    %3d %s\n", i, m)
	}
	return b.String()
}

// Explore runs sc under every schedule opt allows and returns what it
// found; it stops at the first failure.
func Explore(sc Scenario, opt Options) (res Result) {
	res.Scenario = sc.Name
	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }()
	if opt.Script != nil {
		res.Exhaustive = 1
		res.Failure = runOnce(sc, &chooser{script: opt.Script})
		return res
	}
	if opt.Replay != "" {
		prefix, err := parseSchedule(opt.Replay)
		if err != nil {
			res.Failure = &Failure{Schedule: opt.Replay, Problems: []string{err.Error()}}
			return res
		}
		ch := &chooser{prefix: prefix}
		res.Exhaustive = 1
		res.Failure = runOnce(sc, ch)
		return res
	}
	if !opt.SkipExhaustive {
		var prefix []int
		for res.Exhaustive < opt.MaxSchedules {
			ch := &chooser{prefix: prefix}
			res.Exhaustive++
			if f := runOnce(sc, ch); f != nil {
				res.Failure = f
				return res
			}
			var more bool
			if prefix, more = next(ch.points, opt.MaxPreemptions, opt.MaxFaults); !more {
				res.Complete = true
				break
			}
		}
	}
	for i := range opt.Random {
		seed := opt.Seed + uint64(i)
		ch := &chooser{
			rng:    rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
			maxPre: opt.RandomPreemptions, maxFault: opt.RandomFaults, pPre: opt.PPreempt, pFault: opt.PFault,
		}
		res.Random++
		if f := runOnce(sc, ch); f != nil {
			f.Seed, f.Random = seed, true
			res.Failure = f
			return res
		}
	}
	return res
}

// runOnce runs one schedule of sc and returns its failure, if any.
func runOnce(sc Scenario, ch *chooser) *Failure {
	w := newWorld()
	if sc.Setup != nil {
		sc.Setup(w)
	}
	s := newSched(ch, sc.Faults)
	w.sched, w.Store.Hook, w.Outside.sched = s, s, s
	for _, a := range sc.Actors {
		s.spawn(a.Name, a.Crashable, func(ctx context.Context) { a.Run(ctx, w) })
	}
	s.run()
	if s.failure == "" && sc.Settle != nil {
		s.forced = true
		s.spawn("settle", false, func(ctx context.Context) { sc.Settle(ctx, w) })
		s.run()
	}
	problems := w.problems
	if s.failure != "" {
		problems = append(problems, s.failure)
	} else {
		problems = append(problems, w.check()...)
		if sc.Check != nil {
			problems = append(problems, sc.Check(w)...)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return &Failure{Schedule: formatSchedule(ch.points), Trace: s.trace, Problems: problems}
}

// World is what one schedule runs in: one store and one outside service,
// shared by every instance, and one clock.
type World struct {
	Store   *Store
	Outside *Outside
	Clock   *Clock
	// App is the scenario's application, as its Setup made it.
	App any
	// Wrap, if set before Setup makes the instances, is the store each
	// Keeper gets around Store (a planted defect: a store that breaks the
	// contract in one way).
	Wrap func(idempotency.Store) idempotency.Store

	sched    *Sched
	mu       sync.Mutex
	answers  []Answered
	problems []string
}

func newWorld() *World {
	return &World{Store: NewStore(), Outside: NewOutside(), Clock: &Clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
}

// Clock is the world's time, which only sleeps move.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now is the world's time, the Keepers' Config.Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep is a move: the actor of ctx waits d, and the world's clock moves on
// by d when it wakes (whoever else moved meanwhile did so in no time). A
// paused process is an actor the scheduler does not pick while others
// sleep past its lock.
func (w *World) Sleep(ctx context.Context, d time.Duration) {
	if w.sched != nil {
		if err := w.sched.Sleep(ctx, "sleep "+d.String()); err != nil {
			return
		}
	}
	w.Clock.mu.Lock()
	w.Clock.now = w.Clock.now.Add(d)
	w.Clock.mu.Unlock()
}

// Spawn adds an actor while the schedule runs (a webhook the outside
// service sends once it executed a call).
func (w *World) Spawn(name string, fn func(ctx context.Context)) {
	if w.sched != nil {
		w.sched.Spawn(name, fn)
	}
}

// Config is an idempotency.Config for one of the world's instances: its
// store, clock and settings, which the caller may change before New.
func (w *World) Config() idempotency.Config {
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("EXPLORE_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return idempotency.Config{
		Transactor: w.Store, Now: w.Clock.Now, Log: log,
		TTL: TTL, LockTimeout: LockTimeout, CancelAfter: CancelAfter, ReconcileInterval: time.Second,
		Wait: time.Nanosecond, PollMin: time.Hour, PollMax: time.Hour,
	}
}

// Keeper is a new instance of the core over the world (cfg from Config).
func (w *World) Keeper(cfg idempotency.Config) *idempotency.Keeper {
	var store idempotency.Store = w.Store
	if w.Wrap != nil {
		store = w.Wrap(store)
	}
	return idempotency.New(store, cfg)
}

// Answered is an answer a client received, or the layer's refusal.
type Answered struct {
	Actor, Scope, Key string
	// Lifetime is the key's record's lifetime when the answer came (see
	// Store.Lifetime).
	Lifetime int
	Status   int
	Body     []byte
	Final    bool
	Replayed bool
	Refusal  error
}

// Guarded sends one keyed request to k's Guarded, as a client would, and
// notes the answer it gets.
func (w *World) Guarded(ctx context.Context, k *idempotency.Keeper, in idempotency.Input,
	h func(ctx context.Context, op *idempotency.Op, body []byte) idempotency.Answer) Answered {
	a, replayed, err := k.Guarded(ctx, in, h)
	return w.note(ctx, in, a, replayed, err)
}

// Atomic sends one keyed request to k's Atomic, as a client would, and
// notes the answer it gets.
func (w *World) Atomic(ctx context.Context, k *idempotency.Keeper, in idempotency.Input,
	h func(ctx context.Context, body []byte) idempotency.Answer) Answered {
	a, replayed, err := k.Atomic(ctx, in, h)
	return w.note(ctx, in, a, replayed, err)
}

func (w *World) note(ctx context.Context, in idempotency.Input, a idempotency.Answer, replayed bool, err error) Answered {
	got := Answered{Scope: in.Scope, Key: in.Keys[0], Status: a.Status, Body: a.Body, Final: a.Final, Replayed: replayed, Refusal: err}
	if act := w.actorName(ctx); act != "" {
		got.Actor = act
	}
	got.Lifetime = w.Store.Lifetime(in.Scope, in.Keys[0])
	w.mu.Lock()
	w.answers = append(w.answers, got)
	w.mu.Unlock()
	return got
}

func (w *World) actorName(ctx context.Context) string {
	if w.sched == nil {
		return ""
	}
	if a := w.sched.actorOf(ctx); a != nil {
		return a.name
	}
	return ""
}

// Answers returns the answers clients received, in order.
func (w *World) Answers() []Answered {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.answers)
}

// Fail notes a broken invariant seen while the schedule runs (an answer
// that contradicts what the outside service holds at that moment).
func (w *World) Fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, fmt.Sprintf(format, args...))
}

// Reconcile brings the outside calls to rest as time and k's reconciler
// would: rounds six minutes of the clock apart, past every lock, cancel
// and backoff, until no call is due any more (or 20 rounds).
func (w *World) Reconcile(ctx context.Context, k *idempotency.Keeper) {
	for range 20 {
		w.Sleep(ctx, 6*time.Minute)
		_, _ = k.Reconcile(ctx)
		if !slices.ContainsFunc(w.Store.Calls(), func(c idempotency.Call) bool { return !c.DueAt.IsZero() }) {
			return
		}
	}
}
