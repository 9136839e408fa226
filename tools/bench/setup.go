package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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

	b.say("building cmd/api, and its baseline (tools/bench/baselineapi)")
	bins, err := testkit.Build(ctx, dir, "cmd/api", "tools/bench/baselineapi")
	if err != nil {
		return nil, err
	}
	served, baseline := bins[0], bins[1]

	b.say("starting a private PostgreSQL cluster and redis-server")
	if b.pg, err = harness.StartPostgres(o.logs); err != nil {
		return nil, err
	}
	if b.redis, err = testkit.RunRedis(dir, o.logs); err != nil {
		return nil, err
	}
	if b.dbURL, err = b.pg.CreateDatabase("bench"); err != nil {
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
	}
	start := func(name, bin string, env ...string) (*api, error) {
		addr, err := testkit.FindFreeAddr()
		if err != nil {
			return nil, err
		}
		p := b.procs.Add(&testkit.Process{
			Name: name, Path: bin, Addr: addr, Log: o.logs,
			Env: append(append([]string{"HTTP_ADDR=" + addr}, common...), env...),
		})
		if err := p.Start(2 * time.Minute); err != nil {
			return nil, err
		}
		a := newAPI("http://"+addr, 2*o.clients)
		a.pid = p.Pid()
		return a, nil
	}
	// The first start applies the migrations; the others find them done.
	if b.plain, err = start("api", served, "JANITOR_INTERVAL=1s"); err != nil {
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

	cfg, err := pgxpool.ParseConfig(b.dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = dbMaxConns
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
