package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/tools/harness"
)

// report gathers a run's results and writes them as markdown.
type report struct {
	started, finished time.Time
	opts              options
	machine           []string
	execMode          string
	main              sideBySide
	elsewhere         elsewhere
	whole             wholeProcess
	storm             storms
	growth            []growthRow
	purge             purgeResult
	micro             micro
	// pgErrors is the ERROR lines PostgreSQL logged in the whole run, and
	// pgKeyed its lines that named an idempotency key.
	pgErrors, pgKeyed int
	// pgErrorKinds is what kinds of ERROR those were (logCounter.errorKinds).
	pgErrorKinds string
	// rss is each API instance's peak resident set after the side-by-side
	// phases, by name.
	rss []rssRow
}

// rssRow is one instance's peak resident set.
type rssRow struct {
	name  string
	bytes int64
}

// describeMachine names what the figures depend on.
func describeMachine(ctx context.Context, pg *harness.Postgres) []string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
		_ = f.Close()
	}
	version := func(name string, args ...string) string {
		out, err := exec.CommandContext(ctx, name, args...).Output()
		if err != nil {
			return name + ": unknown"
		}
		return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	server, _ := testkit.LookPath("postgres", harness.PostgresBinaries)
	return []string{
		fmt.Sprintf("%d logical CPUs (%s), GOMAXPROCS=%d, %s/%s", runtime.NumCPU(), cpu, runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH),
		runtime.Version(),
		version(server, "--version") + " (private cluster, fsync off, synchronous_commit on)",
		version("redis-server", "--version"),
		"load generator, PostgreSQL, Redis and the nine API instances (one measured at a time) all share these CPUs",
	}
}

// failures lists the phases in which requests failed, and storms whose
// key made other than one order or got other than one answer. Targets
// missed are reported, not failures: they depend on the machine.
func (r *report) failures() []string {
	var out []string
	storms := []struct {
		r      stormResult
		orders int
	}{{r.storm.Plain, r.storm.PlainOrders}, {r.storm.Cached, r.storm.CachedOrders}}
	if r.opts.sideOnly {
		storms = nil
	}
	for _, s := range storms {
		// A 409 is the contract's answer to a duplicate that waited
		// IDEMPOTENCY_WAIT in vain (a slow machine); anything else that is
		// not the one 201 is a fault.
		if wrong := s.r.Failed - s.r.Statuses[http.StatusConflict]; s.orders != 1 || s.r.Bodies != 1 || wrong > 0 {
			out = append(out, fmt.Sprintf("%s: %d orders, %d distinct 201 bodies, %d answers neither 201 nor 409 (%s)",
				s.r.Name, s.orders, s.r.Bodies, wrong, s.r.Note))
		}
	}
	all := []result{r.main.Raw, r.main.RawNoRecord, r.main.Without, r.main.Create, r.main.Guarded, r.main.CreateRedis, r.main.ReplayPG, r.main.ReplayRedis, r.main.ReplayOne, r.main.ReplayOneRedis,
		r.elsewhere.Create, r.elsewhere.Retry, r.elsewhere.FloorCreate, r.elsewhere.FloorRetry, r.elsewhere.PeerCreate, r.elsewhere.PeerRetry,
		r.purge.Quiet, r.purge.Purging,
		r.whole.Handler, r.whole.Traced, r.whole.Sampled, r.whole.Defaults, r.whole.Quiet, r.whole.NoDispatch, r.whole.DefaultsReplay,
		r.whole.HandlerAtOnce, r.whole.SampledAtOnce}
	for _, g := range r.growth {
		all = append(all, g.Create, g.Replay)
	}
	if e := r.elsewhere; e.PeerOrders != e.PeerAnswers {
		out = append(out, fmt.Sprintf("(r) the peer: %d orders for %d stored answers", e.PeerOrders, e.PeerAnswers))
	}
	for _, x := range all {
		if x.Failed > 0 {
			out = append(out, fmt.Sprintf("%s: %d of %d (%s)", x.Name, x.Failed, x.Requests, x.Note))
		}
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", harness.Millis(d)) }

func row(r result) string {
	cpu := "–"
	if r.CPU > 0 {
		cpu = fmt.Sprintf("%.0f", us(r.CPUPerRequest()))
	}
	return fmt.Sprintf("| %s | %d | %.0f | %s | %s | %s | %d | %d | %s |", r.Name, r.Requests, r.Rate(), ms(r.Lat.Percentile(50)), ms(r.Lat.Percentile(99)), cpu, r.PoolWaits, r.Failed, load(r))
}

// load is the load average beside a figure.
func load(r result) string {
	if r.Load < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", r.Load)
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func (r *report) markdown() string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format+"\n", args...) }
	m := r.main
	p("# Benchmarks")
	p("")
	p("Written by `make bench` (`go run ./tools/bench`) on %s, in %s. Absolute figures depend on the", r.started.UTC().Format("2006-01-02"), r.finished.Sub(r.started).Round(time.Second))
	p("machine; the ratios are the point, and all of them come from this one run.")
	p("")
	p("Machine:")
	p("")
	for _, l := range r.machine {
		p("- %s", l)
	}
	p("")
	p("Every phase is a closed loop of %d clients over keep-alive HTTP (or pgx for (a)) for %s after a %s warm-up; each", r.opts.clients, r.opts.duration, r.opts.warm)
	p("API instance and the raw loop have a pool of %d connections. (a), (a'), (b), (c) and (g) ran in turn for %d rounds; the", dbMaxConns, m.Rounds)
	p("median round of each is shown. Latency is per request, in milliseconds. Pool waits count the times a request")
	p("found all %d connections of its pool in use and waited for one (the API's go_sql_wait_count_total).", dbMaxConns)
	p("Statements go through pgx in its %q query-exec mode (the API through database/sql and the raw loop", r.execMode)
	p("directly; both parse the same DATABASE_URL, whose `default_query_exec_mode` sets it: `-query-exec-mode`).")
	p("Load is the machine's load average over the minute each phase ended in (/proc/loadavg).")
	p("")
	p("## Side by side")
	p("")
	p("| phase | requests | req/s | p50 ms | p99 ms | API CPU µs/req | pool waits | failed | load 1m |")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, x := range []result{m.Raw, m.RawNoRecord, m.Without, m.Create, m.Guarded, m.CreateRedis, m.ReplayPG, m.ReplayRedis, m.ReplayOne, m.ReplayOneRedis} {
		p("%s", row(x))
	}
	p("")
	p("- (a) runs the statements of (c) straight through pgx, in one pipeline that commits as one implicit transaction:")
	p("  the order, its outbox event, the idempotency record (the store's plain insert). It is what the database gives")
	p("  this workload at most.")
	p("- (a') is (a) without the record's INSERT: what the database alone charges for the record.")
	p("- (b) is the same program built as `tools/bench/baselineapi`, whose POST /v1/orders skips the middleware and")
	p("  so writes the order and its outbox event without the record.")
	p("- (g) is the same baseline build with `BENCH_ORDERS_MODE=guarded`: the design where the key is reserved in a")
	p("  write of its own, the order's transaction runs, and the answer is stored in a third write (what the payment")
	p("  routes do, because a provider call cannot sit inside a transaction). It is what riding in the commit saves.")
	p("- (d) replays keys written in (c) on the instance without Redis; (e) replays keys written in (c') on the")
	p("  instance with Redis, whose answers were cached after their commit. Both spread over up to 10,000 keys, more")
	p("  than the in-process cache holds (4,096), so most are read from PostgreSQL or Redis.")
	p("- (d1) and (e1) replay one key, as a client retrying one operation does (and as the peer comparison of the")
	p("  performance issue measured): the instance's in-process cache of completed records answers them.")
	p("- API CPU is the instance's user + system CPU over the measured window (/proc/<pid>/stat), less what it spent")
	p("  idle in as long (sampled for 2 s just before: its workers poll on timers), over the requests.")
	p("")
	r.retryElsewhere(p)
	r.perRequest(p)
	r.wholeProcess(p)
	create := m.Create.Rate()
	s := r.storm
	wait := 2 * time.Second // IDEMPOTENCY_WAIT, the default the instances run with
	stormOK := func(x stormResult, orders int) bool {
		return x.Lat.Percentile(99) <= wait+100*time.Millisecond && x.PoolWaits == 0 && orders == 1 && x.Bodies == 1 && x.Failed == 0
	}
	p("## Targets")
	p("")
	p("| target | measured | |")
	p("| --- | --- | --- |")
	p("| idempotent create ≥ 0.85 × create without idempotency | (c)/(b) = %.2f | %s |", ratio(create, m.Without.Rate()), verdict(ratio(create, m.Without.Rate()) >= 0.85))
	p("| idempotent create ≥ 0.5 × the raw-SQL limit | (c)/(a) = %.2f | %s |", ratio(create, m.Raw.Rate()), verdict(ratio(create, m.Raw.Rate()) >= 0.5))
	p("| replay from Redis ≥ 3 × idempotent create | (e)/(c) = %.2f | %s |", ratio(m.ReplayRedis.Rate(), create), verdict(ratio(m.ReplayRedis.Rate(), create) >= 3))
	stormRows := []struct {
		name   string
		r      stormResult
		orders int
	}{{"without Redis", s.Plain, s.PlainOrders}, {"with Redis", s.Cached, s.CachedOrders}}
	if r.opts.sideOnly {
		stormRows = nil
	}
	for _, x := range stormRows {
		p("| retry storm %s: p99 ≤ IDEMPOTENCY_WAIT + 100 ms, pool never exhausted, one effect | p99 %s ms of %s ms; %d pool waits; %d order, %d distinct answer(s), %d failed | %s |",
			x.name, ms(x.r.Lat.Percentile(99)), ms(wait+100*time.Millisecond), x.r.PoolWaits, x.orders, x.r.Bodies, x.r.Failed, verdict(stormOK(x.r, x.orders)))
	}
	p("")
	p("The database alone, with the record / without it: (a)/(a') = %.2f. That is the ceiling of (c)/(b) before any", ratio(m.Raw.Rate(), m.RawNoRecord.Rate()))
	p("code runs: the record is one more INSERT in a transaction of four statements.")
	p("")
	p("Other ratios: record in the commit / reserve-and-complete = (c)/(g) = %.2f; replay from PostgreSQL / idempotent",
		ratio(create, m.Guarded.Rate()))
	p("create = %.2f; idempotent create with Redis / without = %.2f.", ratio(m.ReplayPG.Rate(), create), ratio(m.CreateRedis.Rate(), create))
	p("")
	if r.opts.sideOnly {
		p("Run with -side-only: no storm, growth or purge.")
		return w.String()
	}
	p("## Retry storm (f)")
	p("")
	p("%d requests with the same key and body, released at once, each on a connection of its own that was opened", r.opts.storm)
	p("beforehand. Latency is counted from the release.")
	p("")
	p("| API | p50 ms | p99 ms | max ms | answers | orders made | distinct 201 bodies | pool waits |")
	p("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
	for _, x := range []struct {
		name   string
		r      stormResult
		orders int
	}{{"without Redis", s.Plain, s.PlainOrders}, {"with Redis", s.Cached, s.CachedOrders}} {
		p("| %s | %s | %s | %s | %s | %d | %d | %d |", x.name, ms(x.r.Lat.Percentile(50)), ms(x.r.Lat.Percentile(99)),
			ms(x.r.Lat.Percentile(100)), statusList(x.r.Statuses), x.orders, x.r.Bodies, x.r.PoolWaits)
	}
	p("")
	p("## How the cost grows with the records stored")
	p("")
	p("The records table is emptied, then filled with copies of a real record (same fingerprint and answer) up to")
	p("each size; replays pick keys spread over the whole table, so the index is walked at its full size. Each step")
	p("measures replays, then creates, for %s each; the records a create step adds are deleted after it.", r.opts.duration/2)
	p("")
	p("| records stored | create req/s | create p99 ms | replay req/s | replay p99 ms |")
	p("| ---: | ---: | ---: | ---: | ---: |")
	for _, g := range r.growth {
		p("| %d | %.0f | %s | %.0f | %s |", g.Records, g.Create.Rate(), ms(g.Create.Lat.Percentile(99)), g.Replay.Rate(), ms(g.Replay.Lat.Percentile(99)))
	}
	if len(r.growth) > 1 {
		first, last := r.growth[0], r.growth[len(r.growth)-1]
		p("")
		p("From the smallest to the largest table: create × %.2f, replay × %.2f.", ratio(last.Create.Rate(), first.Create.Rate()), ratio(last.Replay.Rate(), first.Replay.Rate()))
	}
	p("")
	pu := r.purge
	p("## The janitor purging %d expired records under load", pu.Expired)
	p("")
	p("Idempotent creates at full load, first with nothing to purge (%s), then from the moment the expired records", r.opts.duration)
	p("were committed until the janitor (every second, 500 records a statement, 10 ms between statements) had")
	p("deleted them all.")
	p("")
	p("| window | seconds | req/s | p50 ms | p99 ms |")
	p("| --- | ---: | ---: | ---: | ---: |")
	p("| nothing to purge | %.0f | %.0f | %s | %s |", pu.Quiet.Elapsed.Seconds(), pu.Quiet.Rate(), ms(pu.Quiet.Lat.Percentile(50)), ms(pu.Quiet.Lat.Percentile(99)))
	p("| janitor purging | %.0f | %.0f | %s | %s |", pu.Purging.Elapsed.Seconds(), pu.Purging.Rate(), ms(pu.Purging.Lat.Percentile(50)), ms(pu.Purging.Lat.Percentile(99)))
	p("")
	purgeRatio := ratio(float64(pu.Purging.Lat.Percentile(99)), float64(pu.Quiet.Lat.Percentile(99)))
	p("p99 while purging / p99 without: %.2f (target ≤ 2: %s). Purged at %.0f records/s; %d expired records were left when the window closed.",
		purgeRatio, verdict(purgeRatio <= 2 && pu.Left == 0), ratio(float64(pu.Expired-pu.Left), pu.Purging.Elapsed.Seconds()), pu.Left)
	p("")
	p("Repeat with `make bench`; `go run ./tools/bench -h` lists the knobs (clients, phase length, storm size, sizes).")
	return w.String()
}

// statusList spells answer counts as "201×1000".
func statusList(m map[int]int) string {
	var parts []string
	for _, code := range []int{201, 409, 429, 500, 502, 503} {
		if n := m[code]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d×%d", code, n))
		}
	}
	for code, n := range m {
		switch code {
		case 201, 409, 429, 500, 502, 503:
		default:
			parts = append(parts, fmt.Sprintf("%d×%d", code, n))
		}
	}
	return strings.Join(parts, " ")
}

// retryElsewhere writes (r) and its goals.
func (r *report) retryElsewhere(p func(string, ...any)) {
	e := r.elsewhere
	p("## A retry on another instance (r)")
	p("")
	p("Two API instances without Redis on one database, A (the instance of (c)) and B, which has never seen a key:")
	p("creates on A for %s with fresh keys, then every key that got its 201 sent once more to B, as a client's", r.opts.duration)
	p("retry lands behind a load balancer, until the keys run out (the warm-up's retries are not counted). The")
	p("floor does the same: tools/bench/floorapi creates on A, and a second floor on the same database")
	p("(FLOOR_READS=1) answers each retry from one SELECT of the record by its primary key. So does the Fiber peer,")
	p("tools/fiberpeer, with DATABASE_URL: Fiber v3's idempotency middleware at its defaults, its stored answers")
	p("and its orders in PostgreSQL, two instances on a database of their own; its middleware reads the stored")
	p("answer first, so each retry on its B is one SELECT too. The six phases ran in turn for %d round(s); the", max(1, len(e.Retry.Runs)))
	p("round with the median whole-process CPU of each is shown, and a goal's verdict is on the median of its")
	p("ratios taken round by round.")
	p("")
	p("| phase | requests | req/s | p50 ms | p99 ms | API CPU µs/req | pool waits | failed | load 1m |")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, x := range []result{e.Create, e.Retry, e.FloorCreate, e.FloorRetry, e.PeerCreate, e.PeerRetry} {
		p("%s", row(x))
	}
	p("")
	// The rolled-back transactions and ERROR lines were counted around
	// the first round's retries.
	first := e.Retry
	if len(first.Runs) > 0 {
		first = first.Runs[0]
	}
	perRetry := func(n int) float64 { return ratio(float64(n), float64(first.Requests)) }
	// The verdicts are on the median of the ratios taken round by round
	// (byRound), between phases of one round.
	p("| goal | measured | |")
	p("| --- | --- | --- |")
	rateGoalRow(p, "a retry on B ≥ 2 × a create on A", e.Retry, e.Create, 2)
	rateGoalRow(p, "a retry on B ≥ 1.1 × the peer's retry on its B", e.Retry, e.PeerRetry, 1.1)
	rateGoalRow(p, "the floor's retry on its B, over the peer's on its B", e.FloorRetry, e.PeerRetry, 0)
	rateGoalRow(p, "a create on A, over the peer's create on its A", e.Create, e.PeerCreate, 0)
	cpuGoalRow(p, "API CPU per retry on B, over the floor's read", e.Retry, e.FloorRetry, result.CPUPerRequest, 1.3)
	cpuGoalRow(p, "API CPU per retry on B, over the peer's on its B", e.Retry, e.PeerRetry, result.CPUPerRequest, 0)
	p("| no rolled-back transaction per retry | %d in the database of A and B while B's retries of the first round ran (%.3f per retry) | %s |",
		e.Rollbacks, perRetry(e.Rollbacks), verdict(e.Rollbacks == 0))
	p("| no ERROR line in PostgreSQL's log per retry | %d while the retries ran (%.3f per retry) | %s |", e.Errors,
		perRetry(e.Errors), verdict(e.Errors == 0))
	p("| the peer: one order per stored answer | %d orders, %d answers | %s |", e.PeerOrders, e.PeerAnswers,
		verdict(e.PeerOrders == e.PeerAnswers))
	p("")
	p("Rolled-back transactions are pg_stat_database's `xact_rollback` of the database A and B share, read ten")
	p("seconds after the phases before and after B's retries (PostgreSQL flushes a busy backend's counts that late);")
	p("its other instances' janitors and dispatchers count too. ERROR lines are counted in the private cluster's")
	p("log over the same span, every database's; the bench keeps no line, since a line may name a key. In the")
	kinds := ""
	if r.pgErrorKinds != "" {
		kinds = " (" + r.pgErrorKinds + ")"
	}
	p("whole run, from the cluster's start to the report: %d%s, and %d line(s) naming an idempotency key.", r.pgErrors, kinds, r.pgKeyed)
	p("")
	p("The peer serves HTTP with fasthttp, the floor and the API with net/http. A retry on either B is one SELECT")
	p("by primary key and a small answer, so what differs is mostly the HTTP server's own cost: the floor's retry")
	p("over the peer's is the most that net/http, encoding/json and pgx alone reach against it on this machine,")
	p("and the API's retry can at best match the floor's. The peer's stored answers and orders are counted after")
	p("every round: an order without its own answer would be a retry that ran the handler again.")
	p("")
}

// perRequest writes what one request costs the API, the figures that do not
// move with load, and the goals of the performance issue.
func (r *report) perRequest(p func(string, ...any)) {
	m, mi := r.main, r.micro
	create := m.Create.Rate()
	p("## Per request")
	p("")
	p("| path | API CPU µs/req (load run) | allocs/req | bytes/req | instructions/req (callgrind) | load 1m |")
	p("| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, x := range []struct {
		name, path string
		r          result
	}{{"create (c)", "create", m.Create}, {"create, tracing on (h')", "traced", r.whole.Traced},
		{"create, one trace in ten (h'')", "sampled", r.whole.Sampled},
		{"replay of one key (d1)", "replay", m.ReplayOne}, {"replay of one key, with Redis (e1)", "", m.ReplayOneRedis},
		{"retry on an instance that never saw the key (r)", "elsewhere", r.elsewhere.Retry},
		{"replay over 10,000 keys from PostgreSQL (d)", "", m.ReplayPG}, {"replay over 10,000 keys from Redis (e)", "", m.ReplayRedis}} {
		instr, allocs, bytes := "–", "–", "–"
		if v, ok := mi.Instructions[x.path]; ok {
			instr = fmt.Sprintf("%.0f", v)
		}
		if v, ok := mi.Allocs[x.path]; ok {
			allocs, bytes = fmt.Sprint(v), fmt.Sprint(mi.Bytes[x.path])
		}
		p("| %s | %.0f | %s | %s | %s | %s |", x.name, us(x.r.CPUPerRequest()), allocs, bytes, instr, load(x.r))
	}
	p("")
	p("Allocations and instructions come from `BenchmarkHandler` in `internal/app` (the program's handler, PostgreSQL,")
	p("no socket; the replay there is answered by the in-process cache, as (d) and (e) are once an instance has seen")
	p("the key; the traced create exports every span over OTLP/HTTP to a sink that drops them, as (h') does).")
	p("The test binary runs with the garbage collector's target that cmd/api sets (GOGC=%d).", app.GCPercent)
	p("Instructions are what callgrind counted in the whole test program with one P (GOMAXPROCS=1): the")
	p("difference between two iteration counts over the difference of iterations, so start-up and warm-up cancel")
	p("out. They include the garbage collections the requests cause and the test's building of each request; for")
	p("the traced create, the export of its spans and the in-process sink's reading of them; for the retry on an")
	p("instance that never saw the key, what BenchmarkHandler's elsewhere path counts less a create (it creates each")
	p("key on another instance first, its timer stopped, which callgrind does not see). Unlike CPU time, they")
	p("come out the same, within a fraction of a percent, whatever else the machine is doing. valgrind hides the")
	p("processor's SHA extensions, so SHA-256 (the request's digests, the API key's) counts several times what it")
	p("costs on the processor itself.")
	if c, t := mi.Instructions["create"], mi.Instructions["traced"]; c > 0 && t > 0 {
		p("In instructions, tracing on costs %.2f× a create", t/c)
		if s := mi.Instructions["sampled"]; s > 0 {
			p("(every trace), %.2f× at one trace in ten.", s/c)
		} else {
			p("(every trace).")
		}
	}
	if mi.Note != "" {
		p("%s.", mi.Note)
	}
	p("")
	for _, x := range r.rss {
		p("- peak resident set of %s: %.1f MiB", x.name, float64(x.bytes)/(1<<20))
	}
	p("")
	p("| goal | measured | |")
	p("| --- | --- | --- |")
	// Each CPU goal is a ratio to the floor's figure measured the same way
	// in the same run (the performance issue's request): what net/http,
	// encoding/json and pgx alone cost here, whatever the machine.
	w := r.whole
	whole, lessIdle := result.ProcessCPUPerRequest, result.CPUPerRequest
	cpuGoalRow(p, "create, whole process, default settings: (w)/(z)", w.Defaults, w.Floor, whole, 1.15)
	cpuGoalRow(p, "create, whole process, default settings, against the floor that reads first: (w)/(z')", w.Defaults, w.FloorReads, whole, 0)
	cpuGoalRow(p, "replay of one key, whole process, default settings: (w1)/(z1)", w.DefaultsReplay, w.FloorReplay, whole, 1.2)
	cpuGoalRow(p, "create, API CPU less idle: (c)/(z)", m.Create, w.Floor, lessIdle, 0)
	cpuGoalRow(p, "replay of one key, API CPU less idle: (d1)/(z1)", m.ReplayOne, w.FloorReplay, lessIdle, 0)
	cpuGoalRow(p, "replay of one key with Redis, API CPU less idle: (e1)/(z1)", m.ReplayOneRedis, w.FloorReplay, lessIdle, 0)
	if a, ok := mi.Allocs["create"]; ok {
		p("| allocations per create ≤ 150 | %d | %s |", a, verdict(a <= 150))
	}
	if off, on := w.HandlerAtOnce.CPUPerRequest(), w.SampledAtOnce.CPUPerRequest(); off > 0 && on > 0 {
		got, rounds := byRound(w.SampledAtOnce, w.HandlerAtOnce, cpuFigure(lessIdle))
		p("| tracing one trace in ten (parent-based ratio 0.1) ≤ 1.05 × create's API CPU untraced, the two at the same time | (h'')/(h) = %.2f (load %s)%s | %s |",
			ratio(float64(on), float64(off)), load(w.HandlerAtOnce), rounds, verdict(got <= 1.05))
	}
	if off, on := w.Handler.CPUPerRequest(), w.Sampled.CPUPerRequest(); off > 0 && on > 0 {
		_, rounds := byRound(w.Sampled, w.Handler, cpuFigure(lessIdle))
		p("| tracing one trace in ten, the two one after the other | (h'')/(h) = %.2f (load %s, %s)%s | reported |",
			ratio(float64(on), float64(off)), load(w.Handler), load(w.Sampled), rounds)
	}
	if off, on := w.Handler.CPUPerRequest(), w.Traced.CPUPerRequest(); off > 0 && on > 0 {
		p("| tracing every trace: what the OTel SDK costs | (h')/(h) = %.2f (load %s, %s) | reported |", ratio(float64(on), float64(off)), load(w.Handler), load(w.Traced))
	}
	p("| idempotent create ≥ 0.6 × the raw pgx loop sent the same way | (c)/(a) = %.2f | %s |", ratio(create, m.Raw.Rate()), verdict(ratio(create, m.Raw.Rate()) >= 0.6))
	p("| replay without Redis ≥ 6 × create | (d1)/(c) = %.2f | %s |", ratio(m.ReplayOne.Rate(), create), verdict(ratio(m.ReplayOne.Rate(), create) >= 6))
	p("| replay with Redis ≥ 6 × create | (e1)/(c) = %.2f | %s |", ratio(m.ReplayOneRedis.Rate(), create), verdict(ratio(m.ReplayOneRedis.Rate(), create) >= 6))
	// Beside it, the floor's tail from its own phase (z) on the same
	// machine: how much of a tail the machine makes whatever serves it.
	p50, p99 := m.Create.Lat.Percentile(50), m.Create.Lat.Percentile(99)
	f50, f99 := w.Floor.Lat.Percentile(50), w.Floor.Lat.Percentile(99)
	p("| create p99 ≤ 3 × p50 | %s / %s ms = %.2f (the floor (z): %s / %s ms = %.2f) | %s |", ms(p99), ms(p50), ratio(float64(p99), float64(p50)),
		ms(f99), ms(f50), ratio(float64(f99), float64(f50)), verdict(p99 <= 3*p50))
	peak := int64(0)
	for _, x := range r.rss {
		peak = max(peak, x.bytes)
	}
	p("| peak RSS < 100 MiB | %.1f MiB | %s |", float64(peak)/(1<<20), verdict(peak > 0 && peak < 100<<20))
	p("")
}

// byRound is x's figure over y's for a goal's verdict. Where the two ran
// the same rounds, it is the median of the ratios taken round by round
// (x.Runs[i] over y.Runs[i], phases that ran a few seconds apart), which a
// slow minute moves less than the ratio of two medians from different
// rounds, with a note that lists them; else the ratio of the figures shown.
// figure is what is compared: a CPU per request (cpuFigure) or a rate.
func byRound(x, y result, figure func(result) float64) (float64, string) {
	over := func(x, y result) float64 {
		if d := figure(y); d > 0 {
			return figure(x) / d
		}
		return 0
	}
	if len(x.Runs) < 2 || len(x.Runs) != len(y.Runs) {
		return over(x, y), ""
	}
	each := make([]float64, len(x.Runs))
	s := make([]string, len(each))
	for i := range x.Runs {
		if figure(y.Runs[i]) <= 0 {
			return over(x, y), ""
		}
		each[i] = over(x.Runs[i], y.Runs[i])
		s[i] = fmt.Sprintf("%.2f", each[i])
	}
	median := slices.Sorted(slices.Values(each))[len(each)/2]
	return median, fmt.Sprintf("; round by round %s, median %.2f", strings.Join(s, ", "), median)
}

// cpuGoalRow writes the row of a CPU goal: x's figure over the floor's, at
// most goal (0: reported, no goal). Where both ran the same rounds, the
// verdict is on the median of the ratios taken round by round (byRound),
// shown after the medians'.
func cpuGoalRow(p func(string, ...any), name string, x, floor result, perRequest func(result) time.Duration, goal float64) {
	got, rounds := byRound(x, floor, cpuFigure(perRequest))
	v := "reported"
	if goal > 0 {
		name = fmt.Sprintf("%s ≤ %.2f × the floor's", name, goal)
		v = verdict(got > 0 && got <= goal)
	}
	p("| %s | %.0f / %.0f µs = %.2f (load %s, %s)%s | %s |", name, us(perRequest(x)), us(perRequest(floor)),
		ratio(float64(perRequest(x)), float64(perRequest(floor))), load(x), load(floor), rounds, v)
}

// rateGoalRow writes the row of a goal on rates: x's over y's, at least
// goal (0: reported, no goal), the goal named in name. Like cpuGoalRow's,
// the verdict is on the median of the ratios taken round by round.
func rateGoalRow(p func(string, ...any), name string, x, y result, goal float64) {
	got, rounds := byRound(x, y, result.Rate)
	v := "reported"
	if goal > 0 {
		v = verdict(got >= goal)
	}
	p("| %s | %.0f / %.0f req/s = %.2f%s | %s |", name, x.Rate(), y.Rate(), ratio(x.Rate(), y.Rate()), rounds, v)
}

// ratio is x/y, or 0 without a y.
func ratio(x, y float64) float64 {
	if y == 0 {
		return 0
	}
	return x / y
}

// cpuFigure is perRequest as byRound's figure.
func cpuFigure(perRequest func(result) time.Duration) func(result) float64 {
	return func(r result) float64 { return float64(perRequest(r)) }
}

// wholeProcess writes what a request costs the API process measured whole,
// beside the figure of (c), where the difference goes, and what tracing
// adds.
func (r *report) wholeProcess(p func(string, ...any)) {
	w := r.whole
	if w.Rounds == 0 {
		return
	}
	perReq := func(x result, d time.Duration) float64 { return us(x.perRequest(d)) }
	p("## The whole process, and tracing")
	p("")
	p("What a request costs the API process measured whole (its user + system CPU over the window, nothing")
	p("subtracted), on instances that differ from (c)'s in one thing each. Each runs on a database of its own, so")
	p("that its outbox dispatcher publishes its own events and no other instance's (in the side-by-side phases four")
	p("instances share one database, and each dispatcher publishes about a quarter of the events). They ran in turn")
	p("for %d round(s), the two replays (w1) and (z1) too; the round with the median whole-process CPU is shown, and a", w.Rounds)
	p("goal's verdict is on the median of its ratios taken round by round, between phases that ran side by side. Idle is what the instance spends with")
	p("no requests (its workers poll on timers), sampled for 2 s before the window, per request at the window's rate;")
	p("GC is the CPU of its garbage collections during the window (GODEBUG=gctrace=1, on (h), (w) and (z) only). System is")
	p("the part of the whole spent in the kernel (/proc/<pid>/stat), and switches the context switches of all the")
	p("process's threads, voluntary or not (/proc/<pid>/task/*/status), both per request over the window.")
	p("")
	p("| phase | req/s | CPU µs/req, whole process | every round | idle µs/req | less idle | GC µs/req (collections) | system µs/req | switches/req | load 1m |")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, x := range []result{w.Handler, w.Floor, w.FloorReads, w.Traced, w.Sampled, w.HandlerAtOnce, w.SampledAtOnce, w.Defaults, w.Quiet, w.NoDispatch, w.DefaultsReplay, w.FloorReplay} {
		gc, rounds := "–", "–"
		if x.GCCycles > 0 {
			gc = fmt.Sprintf("%.0f (%d)", perReq(x, x.GC), x.GCCycles)
		}
		if len(x.Runs) > 1 {
			var each []string
			for _, run := range x.Runs {
				each = append(each, fmt.Sprintf("%.0f", us(run.ProcessCPUPerRequest())))
			}
			rounds = strings.Join(each, ", ")
		}
		switches := 0.0
		if x.Requests > 0 {
			switches = float64(x.Switches) / float64(x.Requests)
		}
		p("| %s | %.0f | %.0f | %s | %.0f | %.0f | %s | %.0f | %.1f | %s |", x.Name, x.Rate(), us(x.ProcessCPUPerRequest()), rounds, perReq(x, x.Idle),
			us(x.CPUPerRequest()), gc, perReq(x, x.Sys), switches, load(x))
	}
	p("")
	h, d := w.Handler, w.Defaults
	whole := func(x result) float64 { return us(x.ProcessCPUPerRequest()) }
	p("- (h) is (c)'s settings again, on a database of its own: %.0f µs less idle here, %.0f µs in (c), whose", us(h.CPUPerRequest()), us(r.main.Create.CPUPerRequest()))
	p("  dispatcher shares the events with the three other instances of its database.")
	p("- (w), the default settings measured whole, costs %.0f µs, %+.0f µs against (h) less idle. Its parts, each", whole(d), whole(d)-us(h.CPUPerRequest()))
	p("  measured by turning one thing off: idle %.0f µs; the access log and the outbox's log lines ((w) − (w'))", perReq(d, d.Idle))
	p("  %+.0f µs; the dispatcher reading, publishing and marking the events ((w) − (w'')) %+.0f µs (the two overlap",
		whole(d)-whole(w.Quiet), whole(d)-whole(w.NoDispatch))
	p("  by the outbox's log lines). Garbage collection is %.0f µs of (w) and %.0f µs of (h), in both alike. A", perReq(d, d.GC), perReq(h, h.GC))
	p("  difference smaller than the spread between rounds is noise.")
	if h.Requests > 0 && h.Spent > 0 {
		p("- Of (h)'s %.0f µs, %.0f µs (%.0f%%) is system CPU: the kernel's side of the request's socket reads and writes",
			whole(h), perReq(h, h.Sys), 100*float64(h.Sys)/float64(h.Spent))
		p("  (the client's and PostgreSQL's) and of its threads' %.1f context switches per request.",
			float64(h.Switches)/float64(h.Requests))
	}
	if z := w.Floor; z.Requests > 0 {
		p("- (z) and (z1) are not the API but the floor, tools/bench/floorapi: the same requests served with net/http,")
		p("  encoding/json and pgx alone (no Gin, GORM or database/sql, authentication, validation, canonical fingerprint,")
		p("  limits, logs, metrics or dispatcher), the same three statements sent in one batch, replays answered from")
		p("  memory. What it spends, no Go service of this shape spends less of here: %.0f µs per create less idle,", us(z.CPUPerRequest()))
		p("  %.0f µs whole, of which %.0f µs system; %.0f µs per replay whole. The API's own layers cost the rest: (h) less",
			whole(z), perReq(z, z.Sys), whole(w.FloorReplay))
		p("  idle − (z) less idle = %+.0f µs per create, (w1) − (z1) = %+.0f µs per replay.",
			us(h.CPUPerRequest()-z.CPUPerRequest()), whole(w.DefaultsReplay)-whole(w.FloorReplay))
	}
	if zr := w.FloorReads; zr.Requests > 0 && w.Floor.Requests > 0 {
		p("- (z') is the same floor reading the record of a key it does not hold before it writes, as the contract makes")
		p("  the API do for every key an instance has not seen (a replay never runs the handler, on any instance): one")
		p("  round trip more than (z)'s one batch. That read costs the floor %+.0f µs whole per create ((z') − (z)), %.0f µs",
			whole(zr)-whole(w.Floor), whole(zr))
		p("  in all; the API's create pays it too, so (w)/(z') = %.2f is the create's ratio with that trade-off taken out.",
			whole(w.Defaults)/whole(zr))
	}
	if off, on := h.CPUPerRequest(), w.Traced.CPUPerRequest(); off > 0 {
		p("- Tracing on ((h') against (h), less idle, every span exported over OTLP/HTTP to a sink that drops them,")
		p("  through the SDK's otlptracehttp exporter): %+.0f µs per create (%+.0f%%); one trace in ten ((h'')): %+.0f µs (%+.0f%%).",
			us(on-off), 100*(float64(on)/float64(off)-1), us(w.Sampled.CPUPerRequest()-off), 100*(float64(w.Sampled.CPUPerRequest())/float64(off)-1))
	}
	if off, on := w.HandlerAtOnce.CPUPerRequest(), w.SampledAtOnce.CPUPerRequest(); off > 0 {
		p("- The tracing goal's pair ran again at the same time, the two instances under %d clients each for the same", r.opts.clients/2)
		p("  window, so that the machine's drift from one phase to the next, which moves a ratio between phases run one")
		p("  after the other by a fifth either way, falls on both alike: one trace in ten costs %+.0f µs per create there",
			us(on-off))
		p("  (%+.0f%%), and its ratio round by round is the goal's verdict.", 100*(float64(on)/float64(off)-1))
	}
	p("")
}
