package explore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// The scheduler. Every actor runs the real code in a goroutine of its own,
// but only one runs at a time: at each move it can be seen making (a
// statement outside a transaction, a transaction's begin, a call to the
// outside service, a sleep) it parks and hands control back. The scheduler
// then picks who moves next, and with what outcome (a fault), from the
// alternatives the world allows at that point. So one schedule is the
// sequence of its picks, and running the same picks again runs the same
// schedule.
//
// Picks have costs: switching away from the actor that moved last while it
// could go on is a preemption; any outcome but "go on" is a fault. The
// exhaustive search tries every schedule within a bound on both; random
// schedules draw their picks from a seed.

// ErrNoActor: a statement or call was made outside any actor of the running
// schedule (a background goroutine of the code under test). The explorer
// treats it as a process that is gone: nothing runs.
var ErrNoActor = errors.New("explore: a move outside any actor")

// errCrashed: the actor crashed; nothing it asks for runs any more.
var errCrashed = errors.New("explore: the actor's process crashed")

// crash is the panic that unwinds a crashed actor: its process is gone, so
// whatever it held (a transaction) rolls back.
type crash struct{}

// The outcome that crashes an actor where it is parked.
const crashOutcome = "crash"

// move is where an actor is parked: what it is about to do.
type move struct {
	label string
	// write: the move needs the write lock (a write outside a transaction,
	// or a begin).
	write, begin bool
	// faults are the outcomes the explorer may pick besides going on.
	faults []string
	// effect: the move changes the world without the write lock (a call
	// to the outside service, a sleep).
	effect bool
}

type actor struct {
	s         *Sched
	id        int
	name      string
	fn        func(ctx context.Context)
	crashable bool
	started   bool
	done      bool
	crashed   bool
	// moved: its last move changed the world (a write, a begin, a call
	// to the outside service, a sleep). A crash is offered only then: a
	// crash after a read leaves the world as a crash before it.
	moved    bool
	wake     chan string
	at       move
	panicked string
}

type actorKey struct{}

// Sched is one schedule's scheduler: the Store's Hook and the Outside's
// chooser.
type Sched struct {
	ch      *chooser
	faults  map[string]bool
	actors  []*actor
	events  chan struct{}
	last    *actor
	txOwner *actor
	trace   []string
	steps   int
	failure string
	// forced: every pick is "the actor that moved last, going on", and is
	// not recorded (the settling after the explored actors).
	forced bool
}

// maxSteps bounds one schedule's picks: a schedule longer than this is a
// livelock (a loop that never ends).
const maxSteps = 5000

// stallAfter is how long the scheduler waits for a running actor to reach
// its next move before it declares it blocked outside the explorer's view.
const stallAfter = 20 * time.Second

func newSched(ch *chooser, faults []string) *Sched {
	s := &Sched{ch: ch, faults: map[string]bool{}, events: make(chan struct{})}
	for _, f := range faults {
		s.faults[f] = true
	}
	return s
}

// spawn adds an actor that starts when it is first picked.
func (s *Sched) spawn(name string, crashable bool, fn func(ctx context.Context)) {
	s.actors = append(s.actors, &actor{s: s, id: len(s.actors), name: name, fn: fn, crashable: crashable, wake: make(chan string)})
}

func (s *Sched) actorOf(ctx context.Context) *actor {
	a, _ := ctx.Value(actorKey{}).(*actor)
	if a == nil || a.s != s {
		return nil
	}
	return a
}

// Step implements Hook: the actor of ctx parks before a statement.
func (s *Sched) Step(ctx context.Context, label string, write bool) error {
	_, err := s.park(ctx, move{label: label, write: write})
	return err
}

// Begin implements Hook: the actor parks before it begins a transaction,
// and holds the write lock from its next pick until End.
func (s *Sched) Begin(ctx context.Context) error {
	_, err := s.park(ctx, move{label: "begin", write: true, begin: true})
	return err
}

// End implements Hook.
func (s *Sched) End(ctx context.Context) {
	if a := s.actorOf(ctx); a != nil && s.txOwner == a {
		s.txOwner = nil
	}
}

// Choose parks the actor of ctx before label and returns the outcome the
// explorer picked: "" to go on, or one of faults (those the scenario
// allows).
func (s *Sched) Choose(ctx context.Context, label string, faults ...string) (string, error) {
	return s.park(ctx, move{label: label, faults: faults, effect: true})
}

// Sleep parks the actor of ctx before it lets time pass.
func (s *Sched) Sleep(ctx context.Context, label string) error {
	_, err := s.park(ctx, move{label: label, effect: true})
	return err
}

// Spawn adds an actor while a schedule runs (a request still on its way
// over the network); it is picked like any other.
func (s *Sched) Spawn(name string, fn func(ctx context.Context)) { s.spawn(name, false, fn) }

func (s *Sched) park(ctx context.Context, m move) (string, error) {
	a := s.actorOf(ctx)
	switch {
	case a == nil:
		return "", ErrNoActor
	case a.crashed:
		return "", errCrashed
	}
	a.at = m
	s.events <- struct{}{}
	out := <-a.wake
	if out == crashOutcome {
		a.crashed = true
		panic(crash{})
	}
	return out, nil
}

// run picks moves until every actor has ended, or the schedule fails.
func (s *Sched) run() {
	for s.failure == "" {
		enabled := s.enabled()
		if len(enabled) == 0 {
			for _, a := range s.actors {
				if !a.done {
					s.failure = "deadlock: " + a.name + " waits at " + a.at.label + " and nobody can move"
				}
			}
			return
		}
		if s.steps++; s.steps > maxSteps {
			s.failure = fmt.Sprintf("livelock: more than %d moves", maxSteps)
			return
		}
		alts := s.alternatives(enabled)
		i := 0
		if !s.forced {
			var err error
			if i, err = s.ch.pick(alts); err != nil {
				s.failure = err.Error()
				return
			}
		}
		alt := alts[i]
		a := alt.a
		label := "start"
		if a.started {
			label = a.at.label
		}
		if alt.out != "" {
			label += " → " + alt.out
		}
		s.trace = append(s.trace, a.name+": "+label)
		s.last = a
		a.moved = a.started && (a.at.write || a.at.effect)
		if a.at.begin && alt.out != crashOutcome {
			s.txOwner = a
		}
		s.resume(a, alt.out)
		select {
		case <-s.events:
		case <-time.After(stallAfter):
			s.failure = a.name + " did not reach its next move (blocked outside the explorer's view) after " + label
			return
		}
		if a.panicked != "" {
			s.failure = a.name + " panicked: " + a.panicked
		}
	}
}

func (s *Sched) resume(a *actor, out string) {
	if a.started {
		a.wake <- out
		return
	}
	a.started = true
	go func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(crash); !ok {
					a.panicked = fmt.Sprint(p) + "\n" + string(debug.Stack())
				}
			}
			a.done = true
			s.events <- struct{}{}
		}()
		a.fn(context.WithValue(context.Background(), actorKey{}, a))
	}()
}

// enabled lists the actors that can move now: not ended, and not waiting
// for the write lock another actor holds.
func (s *Sched) enabled() []*actor {
	var out []*actor
	for _, a := range s.actors {
		if a.done {
			continue
		}
		if a.started && a.at.write && s.txOwner != nil {
			continue
		}
		out = append(out, a)
	}
	return out
}

// alt is one pick: an actor and its outcome, with what it costs.
type alt struct {
	a          *actor
	out        string
	pre, fault int
}

// alternatives lists the picks at this point, the free ones first: the
// actor that moved last going on, if it can; then the others.
func (s *Sched) alternatives(enabled []*actor) []alt {
	lastOn := false
	for _, a := range enabled {
		lastOn = lastOn || a == s.last
	}
	var alts []alt
	add := func(a *actor) {
		pre := 0
		if lastOn && a != s.last {
			pre = 1
		}
		alts = append(alts, alt{a: a, pre: pre})
		if !a.started {
			return
		}
		for _, f := range a.at.faults {
			if s.faults[f] {
				alts = append(alts, alt{a: a, out: f, pre: pre, fault: 1})
			}
		}
		if a.crashable && a.moved && s.faults[crashOutcome] {
			alts = append(alts, alt{a: a, out: crashOutcome, pre: pre, fault: 1})
		}
	}
	if lastOn {
		add(s.last)
	}
	for _, a := range enabled {
		if !lastOn || a != s.last {
			add(a)
		}
	}
	return alts
}

// Step is one step of a directed schedule: the actor moves, with outcome
// for its first move ("" to go on, a fault, or "crash"), and goes on moving
// until it is parked before a move whose label starts with Until (a crash,
// or an empty Until, is one move).
type Step struct {
	Actor, Until, Outcome string
}

// chooser makes one schedule's picks: the script's or the prefix's, then
// the first alternative (exhaustive search) or a random one (rng), and
// remembers what it could have picked at each point.
type chooser struct {
	script []Step
	// moved: the script's current step has moved its actor once.
	moved  bool
	prefix []int
	points []point
	rng    *rand.Rand
	// Random schedules' bounds, and how often they preempt or fault.
	maxPre, maxFault int
	pPre, pFault     float64
	pre, fault       int
}

type point struct {
	chosen int
	costs  [][2]int
}

func (c *chooser) pick(alts []alt) (int, error) {
	i := len(c.points)
	choice := 0
	switch {
	case len(c.script) > 0:
		var err error
		if choice, err = c.directed(alts); err != nil {
			return 0, err
		}
	case i < len(c.prefix):
		choice = c.prefix[i]
		if choice >= len(alts) {
			return 0, fmt.Errorf("replay diverged at pick %d: %d alternatives, the schedule asks for the %dth (is the code under test deterministic?)", i, len(alts), choice)
		}
	case c.rng != nil:
		choice = c.random(alts)
	}
	p := point{chosen: choice, costs: make([][2]int, len(alts))}
	for j, a := range alts {
		p.costs[j] = [2]int{a.pre, a.fault}
	}
	c.points = append(c.points, p)
	c.pre += alts[choice].pre
	c.fault += alts[choice].fault
	return choice, nil
}

// directed picks the script's current step, moving on to the next once its
// actor has reached the step's Until.
func (c *chooser) directed(alts []alt) (int, error) {
	for len(c.script) > 0 {
		st := c.script[0]
		for j, a := range alts {
			if a.a.name != st.Actor {
				continue
			}
			done := c.moved && (st.Until == "" || st.Outcome == crashOutcome || strings.HasPrefix(a.a.at.label, st.Until))
			if done {
				break
			}
			out := ""
			if !c.moved {
				out = st.Outcome
			}
			if a.out != out {
				continue
			}
			c.moved = true
			return j, nil
		}
		if !c.moved {
			return 0, fmt.Errorf("script: %s cannot %q here", st.Actor, st.Outcome+" move")
		}
		// The step is done (or its actor ended): the next one.
		c.script, c.moved = c.script[1:], false
	}
	return 0, nil
}

// random picks a preemption with probability pPre, a fault with pFault
// (within the bounds), and otherwise one of the free alternatives.
func (c *chooser) random(alts []alt) int {
	var free, pre, fault []int
	for j, a := range alts {
		switch {
		case a.fault > 0 && c.fault+a.fault <= c.maxFault && c.pre+a.pre <= c.maxPre:
			fault = append(fault, j)
		case a.fault == 0 && a.pre > 0 && c.pre+a.pre <= c.maxPre:
			pre = append(pre, j)
		case a.fault == 0 && a.pre == 0:
			free = append(free, j)
		}
	}
	r := c.rng.Float64()
	switch {
	case r < c.pPre && len(pre) > 0:
		return pre[c.rng.IntN(len(pre))]
	case r < c.pPre+c.pFault && len(fault) > 0:
		return fault[c.rng.IntN(len(fault))]
	}
	return free[c.rng.IntN(len(free))]
}

// next is the exhaustive search's next prefix after the schedule whose
// picks were points: the deepest point with an alternative not yet tried
// that stays within the bounds. It reports false when none is left.
func next(points []point, maxPre, maxFault int) ([]int, bool) {
	usedPre := make([]int, len(points)+1)
	usedFault := make([]int, len(points)+1)
	for i, p := range points {
		usedPre[i+1] = usedPre[i] + p.costs[p.chosen][0]
		usedFault[i+1] = usedFault[i] + p.costs[p.chosen][1]
	}
	for i := len(points) - 1; i >= 0; i-- {
		p := points[i]
		for j := p.chosen + 1; j < len(p.costs); j++ {
			if usedPre[i]+p.costs[j][0] <= maxPre && usedFault[i]+p.costs[j][1] <= maxFault {
				prefix := make([]int, i+1)
				for k := range i {
					prefix[k] = points[k].chosen
				}
				prefix[i] = j
				return prefix, true
			}
		}
	}
	return nil, false
}

// formatSchedule spells a schedule's picks as its non-zero ones,
// "pick:alternative" (what -schedule reads back).
func formatSchedule(points []point) string {
	var parts []string
	for i, p := range points {
		if p.chosen != 0 {
			parts = append(parts, strconv.Itoa(i)+":"+strconv.Itoa(p.chosen))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// parseSchedule reads formatSchedule's spelling back into a prefix.
func parseSchedule(spec string) ([]int, error) {
	if spec == "-" || spec == "" {
		return nil, nil
	}
	var prefix []int
	for part := range strings.SplitSeq(spec, ",") {
		at, alt, ok := strings.Cut(part, ":")
		i, err1 := strconv.Atoi(at)
		j, err2 := strconv.Atoi(alt)
		if !ok || err1 != nil || err2 != nil || i < len(prefix) || j < 0 {
			return nil, fmt.Errorf("explore: bad schedule %q: want pick:alternative,… in increasing picks", spec)
		}
		for len(prefix) < i {
			prefix = append(prefix, 0)
		}
		prefix = append(prefix, j)
	}
	return prefix, nil
}
