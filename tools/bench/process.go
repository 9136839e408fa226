package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// wholeProcess is what a create costs the whole API process, measured from
// outside as (c) is, on five instances that differ in one thing each, every
// one on a database of its own (so that its outbox dispatcher publishes its
// own events, and only those):
//
//   - Handler: (c)'s settings (LOG_LEVEL=error, the limiter and tombstones
//     on), the figure (c) reports;
//   - Traced: the same with tracing on, its spans sent over OTLP/HTTP to a
//     sink that drops them;
//   - Sampled: the same with one trace in ten sampled (parent-based), as
//     the guide sets it for production;
//   - Defaults: the default settings, as `make run-pg` runs the API: the
//     access log and the outbox dispatcher (whose sink without Redis is
//     the log) on;
//   - Quiet: the defaults with LOG_LEVEL=error (no access log, no outbox
//     log lines);
//   - NoDispatch: the defaults with OUTBOX_INTERVAL=1h (the dispatcher does
//     not run while the load does);
//   - Floor: not the API but tools/bench/floorapi, net/http, encoding/json
//     and pgx sending the same statements: what the API's layers are
//     measured against;
//   - FloorReads: the second floor (FLOOR_READS=1), which reads the record
//     of a key it does not hold before it writes, as the contract makes
//     the API do (a replay never runs the handler): what that read costs
//     the floor itself.
//
// The instances a goal compares run at the same time, the clients shared
// between them: Handler, Sampled and Traced; Defaults, Floor and
// FloorReads; then Quiet and NoDispatch; then the two replays. Run in
// turn, ten seconds apart, the same instance's CPU per create moved by a
// quarter from one round to the next on this shared machine, and a ratio
// with it; run at once, both sides of a ratio see the same load. The
// groups run for several rounds; each instance keeps its round with the
// median whole-process CPU per request, with every round beside it
// (Runs), so that a goal's ratio is taken round by round. Handler,
// Defaults and Floor also report their garbage collections' CPU
// (gctrace).
type wholeProcess struct {
	Handler, Traced, Sampled, Defaults, Quiet, NoDispatch, Floor, FloorReads result
	// DefaultsReplay and FloorReplay replay one key on the defaults
	// instance and on the floor.
	DefaultsReplay, FloorReplay result
	Rounds                      int
}

func (b *bench) wholeProcess(ctx context.Context) (wholeProcess, error) {
	o := b.opts
	rounds := b.rounds()
	run := fmt.Sprintf("w%d", time.Now().UnixNano())
	window := forDuration(o.duration)
	w := wholeProcess{Rounds: rounds}
	// rotate runs each group of phases, its phases at once, the clients
	// shared between them, for rounds rounds, do giving phase i's work in
	// round r, and keeps each phase's median round, with every round in
	// its Runs.
	type phase struct {
		target *api
		name   string
		into   *result
	}
	rotate := func(groups [][]phase, do func(i, r int, target *api) op) {
		runs := map[*result][]result{}
		for r := range rounds {
			i := 0
			for _, group := range groups {
				clients := max(1, o.clients/len(group))
				got := make([]result, len(group))
				var wg sync.WaitGroup
				for j, x := range group {
					b.say("whole process, round %d/%d: %s (%d clients, beside %d other(s))", r+1, rounds, x.name, clients, len(group)-1)
					work := do(i+j, r, x.target)
					wg.Go(func() { got[j] = b.measureWith(ctx, x.target, x.name, clients, window, work) })
				}
				wg.Wait()
				for j, x := range group {
					b.say("  %s: %.0f µs of CPU per request, %.0f less idle; load %.2f",
						x.name, us(got[j].ProcessCPUPerRequest()), us(got[j].CPUPerRequest()), got[j].Load)
					runs[x.into] = append(runs[x.into], got[j])
				}
				i += len(group)
			}
		}
		for into, rs := range runs {
			*into = medianCPU(rs)
		}
	}
	rotate([][]phase{
		{
			{b.handler, "(h) idempotent create, (c)'s settings", &w.Handler},
			{b.sampled, "(h'') the same, one trace in ten sampled", &w.Sampled},
			{b.traced, "(h') the same, tracing on", &w.Traced},
		},
		{
			{b.defaults, "(w) idempotent create, default settings", &w.Defaults},
			{b.floor, "(z) the floor: net/http, encoding/json and pgx alone", &w.Floor},
			{b.floorOther, "(z') the floor, reading the record first", &w.FloorReads},
		},
		{
			{b.quiet, "(w') default settings, LOG_LEVEL=error", &w.Quiet},
			{b.noDispatch, "(w'') default settings, OUTBOX_INTERVAL=1h", &w.NoDispatch},
		},
	}, func(i, r int, target *api) op { return target.created(fmt.Sprintf("%s%d-%d", run, i, r)) })

	replays := []phase{
		{b.defaults, "(w1) replay of one key, default settings", &w.DefaultsReplay},
		{b.floor, "(z1) replay of one key, the floor", &w.FloorReplay},
	}
	key := run + "-replayed"
	for _, x := range replays {
		ans, err := x.target.createOrder(ctx, key)
		if err := expect(ans, err, http.StatusCreated, false); err != nil {
			return w, fmt.Errorf("%s: the first order: %w", x.name, err)
		}
	}
	rotate([][]phase{replays}, func(_, _ int, target *api) op { return target.replayed([]string{key}) })
	return w, nil
}

// rounds is how many rounds the phases that take a median run: 3, 1 with
// -quick.
func (b *bench) rounds() int {
	if b.opts.quick {
		return 1
	}
	return 3
}

// medianCPU is the run with the median whole-process CPU per request, with
// every run in its Runs.
func medianCPU(rs []result) result {
	s := slices.SortedFunc(slices.Values(rs), func(x, y result) int {
		return int(x.ProcessCPUPerRequest() - y.ProcessCPUPerRequest())
	})
	median := s[len(s)/2]
	median.Runs = rs
	return median
}
