package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/tools/harness"
)

// dbMaxConns is the pool size of every API instance and of the raw loop,
// so that all sides get the same share of the database.
const dbMaxConns = 20

// bench is the running test bed.
type bench struct {
	opts   options
	stdout io.Writer
	pg     *harness.Postgres
	redis  *testkit.Redis
	procs  testkit.Group
	dir    string
	dbURL  string
	pool   *pgxpool.Pool // for the raw loop, seeding and counting

	baseline *api // baseline build: no idempotency middleware
	guarded  *api // baseline build: reserve, order, complete
	plain    *api // the API without Redis; its janitor runs every second
	cached   *api // the API with Redis
	// other is a second API without Redis on plain's database, which
	// never sees a key before (r) retries it there.
	other *api

	// The instances of the whole-process phases (process.go), each the
	// API without Redis on a database of its own, so that its outbox
	// dispatcher publishes its own events and no other's: plain's
	// settings without and with tracing, the default settings, and the
	// defaults with one thing changed.
	handler, traced, sampled, defaults, quiet, noDispatch *api
	// floor is tools/bench/floorapi on a database of its own: net/http,
	// encoding/json and pgx sending the same statements, and nothing else.
	// floorOther is a second floor on floor's database that looks a key
	// it does not hold up in PostgreSQL (FLOOR_READS=1), for (r).
	floor, floorOther *api
	// peer and peerOther are tools/fiberpeer, the Fiber v3 service built
	// with Fiber's idempotency middleware, two instances on a database of
	// their own that keeps its orders and stored answers (DATABASE_URL),
	// for (r); peerDB is that database.
	peer, peerOther *api
	peerDB          string
	// pgLog counts the ERROR lines PostgreSQL writes to its log.
	pgLog *logCounter
	// sink receives the traced instance's spans over OTLP/HTTP and drops
	// them.
	sink *http.Server
	// execMode is the pgx query-exec mode every instance and the raw loop
	// run in, as their DATABASE_URL says.
	execMode string
}

func setUp(ctx context.Context, o options, stdout io.Writer) (*bench, error) {
	dir, err := os.MkdirTemp("", "bench-")
	if err != nil {
		return nil, err
	}
	b := &bench{opts: o, stdout: stdout, dir: dir}
	ok := false
	defer func() {
		if !ok {
			b.close()
		}
	}()

	b.say("building cmd/api, its baseline (tools/bench/baselineapi) and the floor (tools/bench/floorapi)")
	bins, err := testkit.Build(ctx, dir, "cmd/api", "tools/bench/baselineapi", "tools/bench/floorapi")
	if err != nil {
		return nil, err
	}
	served, baseline, floor := bins[0], bins[1], bins[2]
	b.say("building the Fiber peer (tools/fiberpeer, a module of its own)")
	// A module of its own, so that the product module never depends on
	// Fiber.
	peer, err := testkit.BuildModule(ctx, dir, "tools/fiberpeer")
	if err != nil {
		return nil, err
	}

	b.say("starting a private PostgreSQL cluster and redis-server")
	b.pgLog = &logCounter{next: o.logs}
	if b.pg, err = harness.StartPostgres(b.pgLog); err != nil {
		return nil, err
	}
	if b.redis, err = testkit.RunRedis(dir, o.logs); err != nil {
		return nil, err
	}
	if b.dbURL, err = b.pg.CreateDatabase("bench"); err != nil {
		return nil, err
	}
	if b.dbURL, b.execMode, err = withExecMode(b.dbURL, o.execMode); err != nil {
		return nil, err
	}
	sinkURL, err := b.startSink()
	if err != nil {
		return nil, err
	}

	common := []string{
		"DATABASE_URL=" + b.dbURL, "LOG_LEVEL=error", "DB_MAX_CONNS=" + strconv.Itoa(dbMaxConns),
		// The in-process provider is idle here; keep its webhooks out of
		// the way.
		"PROVIDER_WEBHOOK_DELAY=1h",
		// The bench measures what idempotency costs at full speed with
		// everything on: the new-key limiter counts every key, at a quota
		// the load never reaches (the default, 100 a second, would
		// measure the limit), and expired keys leave tombstones.
		"RATE_LIMIT_NEW_KEYS=10000000", "RATE_LIMIT_WINDOW=1s",
		"IDEMPOTENCY_TOMBSTONES=true",
		// The bench is one client address with hundreds of connections:
		// the per-address cap (256 by default) would measure itself.
		"MAX_CONNS_PER_CLIENT=4096",
	}
	start := func(name, bin string, env ...string) (*api, error) {
		return b.startWith(name, bin, o.logs, append(common, env...)...)
	}
	// The first start applies the migrations; the others find them done.
	if b.plain, err = start("api", served, "JANITOR_INTERVAL=1s"); err != nil {
		return nil, err
	}
	if b.other, err = start("api-other", served, "JANITOR_INTERVAL=1h", "OUTBOX_INTERVAL=1h"); err != nil {
		return nil, err
	}
	if b.cached, err = start("api-redis", served, "REDIS_URL="+b.redis.URL(), "JANITOR_INTERVAL=1h"); err != nil {
		return nil, err
	}
	if b.baseline, err = start("api-baseline", baseline, "JANITOR_INTERVAL=1h"); err != nil {
		return nil, err
	}
	if b.guarded, err = start("api-guarded", baseline, "JANITOR_INTERVAL=1h", "BENCH_ORDERS_MODE=guarded"); err != nil {
		return nil, err
	}
	// The whole-process instances, each on a database of its own. The
	// ones with the default settings run as a newcomer runs the API: the
	// access log and the outbox dispatcher (whose sink without Redis is
	// the log) on, written to a pipe, as a container's output is. Only
	// the new-key quota is raised, which the load would otherwise
	// measure (429s). GODEBUG=gctrace=1 makes two of them report each
	// garbage collection's CPU.
	dbOf := map[string]string{}
	own := func(name, bin string, log io.Writer, gc bool, env ...string) (*api, error) {
		dbURL, err := b.pg.CreateDatabase(strings.ReplaceAll(name, "-", "_"))
		if err != nil {
			return nil, err
		}
		if dbURL, _, err = withExecMode(dbURL, o.execMode); err != nil {
			return nil, err
		}
		if bin != served {
			// The API migrates its database as it starts; another
			// program finds it migrated by the API's own command.
			migrate := exec.CommandContext(ctx, served, "migrate")
			migrate.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
			if out, err := migrate.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("migrate %s's database: %w\n%s", name, err, out)
			}
		}
		dbOf[name] = dbURL
		var meter *gcMeter
		if gc {
			meter = &gcMeter{next: log}
			log = meter
			env = append(env, "GODEBUG=gctrace=1")
		}
		a, err := b.startWith(name, bin, log, append(env, "DATABASE_URL="+dbURL)...)
		if err == nil {
			a.gc = meter
		}
		return a, err
	}
	handlerEnv := append(slices.DeleteFunc(slices.Clone(common), func(kv string) bool {
		return strings.HasPrefix(kv, "DATABASE_URL=")
	}), "JANITOR_INTERVAL=1h")
	defaults := []string{"RATE_LIMIT_NEW_KEYS=10000000", "MAX_CONNS_PER_CLIENT=4096"}
	for _, x := range []struct {
		into *(*api)
		name string
		bin  string
		log  io.Writer
		gc   bool
		env  []string
	}{
		{&b.handler, "api-handler", served, o.logs, true, handlerEnv},
		{&b.traced, "api-traced", served, o.logs, false, append(handlerEnv, "OTEL_EXPORTER_OTLP_ENDPOINT="+sinkURL)},
		// The guide's production setting: one trace in ten, parent-based.
		{&b.sampled, "api-traced-sampled", served, o.logs, false, append(handlerEnv, "OTEL_EXPORTER_OTLP_ENDPOINT="+sinkURL,
			"OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.1")},
		{&b.defaults, "api-defaults", served, io.Discard, true, defaults},
		{&b.quiet, "api-defaults-quiet", served, io.Discard, false, append(defaults, "LOG_LEVEL=error")},
		{&b.noDispatch, "api-defaults-nodispatch", served, io.Discard, false, append(defaults, "OUTBOX_INTERVAL=1h")},
		{&b.floor, "api-floor", floor, o.logs, true, []string{"DB_MAX_CONNS=" + strconv.Itoa(dbMaxConns)}},
	} {
		if *x.into, err = own(x.name, x.bin, x.log, x.gc, x.env...); err != nil {
			return nil, err
		}
	}
	if b.floorOther, err = b.startWith("api-floor-other", floor, o.logs,
		"DB_MAX_CONNS="+strconv.Itoa(dbMaxConns), "DATABASE_URL="+dbOf["api-floor"], "FLOOR_READS=1"); err != nil {
		return nil, err
	}

	if err := b.startPeers(peer, o); err != nil {
		return nil, err
	}

	cfg, err := pgxpool.ParseConfig(b.dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = dbMaxConns
	database.LetFinish(cfg.ConnConfig) // as the API's connections do: a hang-up logs no ERROR
	if b.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	ok = true
	return b, nil
}

func (b *bench) close() {
	if b.pool != nil {
		b.pool.Close()
	}
	if b.sink != nil {
		_ = b.sink.Close()
	}
	b.procs.KillAll()
	if b.redis != nil {
		b.redis.Kill()
	}
	if b.pg != nil {
		b.pg.Close()
	}
	_ = os.RemoveAll(b.dir)
}

// say prints one progress line.
func (b *bench) say(format string, args ...any) {
	fmt.Fprintf(b.stdout, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// count runs a SELECT count(*) … query.
func (b *bench) count(ctx context.Context, query string, args ...any) (int, error) {
	var n int
	err := b.pool.QueryRow(ctx, query, args...).Scan(&n)
	return n, err
}

// withExecMode sets pgx's default_query_exec_mode in dbURL when mode is
// given, and says which mode the URL ends up with: every instance and the
// raw loop parse the same URL, so they all run in it.
func withExecMode(dbURL, mode string) (string, string, error) {
	if mode != "" {
		u, err := url.Parse(dbURL)
		if err != nil {
			return "", "", err
		}
		q := u.Query()
		q.Set("default_query_exec_mode", mode)
		u.RawQuery = q.Encode()
		dbURL = u.String()
	}
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return "", "", fmt.Errorf("-query-exec-mode: %w", err)
	}
	return dbURL, cfg.DefaultQueryExecMode.String(), nil
}

// startSink serves an OTLP/HTTP endpoint that reads each batch of spans
// and drops it, for the traced instance, and returns its base URL.
func (b *bench) startSink() (string, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	b.sink = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = b.sink.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// startPeers starts two instances of the Fiber peer (bin) on a database of
// their own, for (r). Each creates the peer's tables when they are
// missing, under an advisory lock (tools/fiberpeer).
func (b *bench) startPeers(bin string, o options) error {
	var err error
	if b.peerDB, err = b.pg.CreateDatabase("peer"); err != nil {
		return err
	}
	if b.peerDB, _, err = withExecMode(b.peerDB, o.execMode); err != nil {
		return err
	}
	start := func(name string) (*api, error) {
		a, err := b.startWith(name, bin, o.logs, "DATABASE_URL="+b.peerDB, "DB_MAX_CONNS="+strconv.Itoa(dbMaxConns))
		if err == nil {
			a.orders = peerOrders
		}
		return a, err
	}
	if b.peer, err = start("peer"); err != nil {
		return err
	}
	b.peerOther, err = start("peer-other")
	return err
}

// startWith starts bin as name on a free loopback address, its log to log
// and env in its environment, and returns its client.
func (b *bench) startWith(name, bin string, log io.Writer, env ...string) (*api, error) {
	addr, err := testkit.FindFreeAddr()
	if err != nil {
		return nil, err
	}
	p := b.procs.Add(&testkit.Process{
		Name: name, Path: bin, Addr: addr, Log: log,
		Env: append([]string{"HTTP_ADDR=" + addr}, env...),
	})
	if err := p.Start(2 * time.Minute); err != nil {
		return nil, err
	}
	a := newAPI("http://"+addr, 2*b.opts.clients)
	a.pid = p.Pid()
	return a, nil
}
