package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
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
// Each ran in turn for several rounds, like the side-by-side phases; the
// round with the median whole-process CPU per request is kept, with every
// round beside it (Runs), so that a goal's ratio can be taken round by
// round, between phases that ran a few seconds apart. Handler, Defaults
// and Floor also report their garbage collections' CPU (gctrace).
type wholeProcess struct {
	Handler, Traced, Sampled, Defaults, Quiet, NoDispatch, Floor, FloorReads result
	// DefaultsReplay and FloorReplay replay one key on the defaults
	// instance and on the floor.
	DefaultsReplay, FloorReplay result
	Rounds                      int
}

func (b *bench) wholeProcess(ctx context.Context) (wholeProcess, error) {
	o := b.opts
	rounds := 3
	if o.quick {
		rounds = 1
	}
	run := fmt.Sprintf("w%d", time.Now().UnixNano())
	window := forDuration(o.duration)
	w := wholeProcess{Rounds: rounds}
	phases := []struct {
		target *api
		name   string
		into   *result
		runs   []result
	}{
		// Each pair a goal compares runs side by side, so that the two
		// see the same load: (h) and (h''), (z) and (w), (w) and (z').
		{b.handler, "(h) idempotent create, (c)'s settings", &w.Handler, nil},
		{b.sampled, "(h'') the same, one trace in ten sampled", &w.Sampled, nil},
		{b.traced, "(h') the same, tracing on", &w.Traced, nil},
		{b.floor, "(z) the floor: net/http, encoding/json and pgx alone", &w.Floor, nil},
		{b.defaults, "(w) idempotent create, default settings", &w.Defaults, nil},
		{b.floorOther, "(z') the floor, reading the record first", &w.FloorReads, nil},
		{b.quiet, "(w') default settings, LOG_LEVEL=error", &w.Quiet, nil},
		{b.noDispatch, "(w'') default settings, OUTBOX_INTERVAL=1h", &w.NoDispatch, nil},
	}
	for r := range rounds {
		for i := range phases {
			x := &phases[i]
			b.say("whole process, round %d/%d: %s", r+1, rounds, x.name)
			res := b.measure(ctx, x.target, x.name, window, x.target.created(fmt.Sprintf("%s%d-%d", run, i, r)))
			b.say("  %.0f µs of CPU per request, %.0f less idle; load %.2f",
				us(res.ProcessCPUPerRequest()), us(res.CPUPerRequest()), res.Load)
			x.runs = append(x.runs, res)
		}
	}
	replays := []struct {
		target *api
		name   string
		into   *result
		runs   []result
	}{
		{b.defaults, "(w1) replay of one key, default settings", &w.DefaultsReplay, nil},
		{b.floor, "(z1) replay of one key, the floor", &w.FloorReplay, nil},
	}
	key := run + "-replayed"
	for _, x := range replays {
		ans, err := x.target.createOrder(ctx, key)
		if err := expect(ans, err, http.StatusCreated, false); err != nil {
			return w, fmt.Errorf("%s: the first order: %w", x.name, err)
		}
	}
	for r := range rounds {
		for i := range replays {
			x := &replays[i]
			b.say("whole process, round %d/%d: %s", r+1, rounds, x.name)
			res := b.measure(ctx, x.target, x.name, window, x.target.replayed([]string{key}))
			b.say("  %.0f µs of CPU per request; load %.2f", us(res.ProcessCPUPerRequest()), res.Load)
			x.runs = append(x.runs, res)
		}
	}
	for _, x := range phases {
		*x.into = medianCPU(x.runs)
		x.into.Runs = x.runs
	}
	for _, x := range replays {
		*x.into = medianCPU(x.runs)
		x.into.Runs = x.runs
	}
	return w, nil
}

// roundRatios are x's figure over y's, round by round (x.Runs[i] against
// y.Runs[i], phases that ran a few seconds apart), and their median: a
// ratio that a slow minute moves less than the ratio of two medians taken
// from different rounds. Nil when the two did not run the same rounds.
func roundRatios(x, y result, perRequest func(result) time.Duration) (each []float64, median float64) {
	if len(x.Runs) < 2 || len(x.Runs) != len(y.Runs) {
		return nil, 0
	}
	for i := range x.Runs {
		if d := perRequest(y.Runs[i]); d > 0 {
			each = append(each, float64(perRequest(x.Runs[i]))/float64(d))
		}
	}
	if len(each) != len(x.Runs) {
		return nil, 0
	}
	sorted := slices.Sorted(slices.Values(each))
	return each, sorted[len(sorted)/2]
}

// medianCPU is the run with the median whole-process CPU per request.
func medianCPU(rs []result) result {
	s := slices.SortedFunc(slices.Values(rs), func(x, y result) int {
		return int(x.ProcessCPUPerRequest() - y.ProcessCPUPerRequest())
	})
	return s[len(s)/2]
}
