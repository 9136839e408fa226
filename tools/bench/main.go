// Command bench measures what idempotency costs, side by side with what the
// database can do at most, in one run on one machine, and writes the
// figures and their ratios to docs/benchmarks.md.
//
// It builds the API twice (as served, and the baseline in baselineapi, the
// same program whose order routes run without the idempotency middleware,
// or with another design),
// starts a private PostgreSQL cluster and a private redis-server, four
// API instances on one database (the baseline, the other design, the API
// without Redis and the API with Redis) and five more on databases of their
// own for the whole-process phases. Then it drives them over HTTP with
// closed-loop clients:
//
//	(a) the SQL of an idempotent order creation, straight through pgx
//	(a') the same SQL without the idempotency record
//	(b) POST /v1/orders without the middleware (baseline build)
//	(c) POST /v1/orders with a fresh key each time
//	(d) replays answered from PostgreSQL
//	(e) replays answered from Redis
//	(f) a retry storm: 1,000 concurrent requests on one key
//	(g) the common design beside ours: reserve the key, run the order, store
//	    the answer, in three writes (the baseline build, BENCH_ORDERS_MODE)
//	(r) every key created on one instance retried once on another that
//	    never saw it, beside the floor doing the same with one read
//
// then what a request costs the whole API process with the default
// settings (access log and outbox dispatcher on), beside the figure of (c),
// and what tracing adds (process.go),
// and how create and replay change as the table holds 1 thousand to
// 1 million records, and what the janitor purging a million expired
// records does to latency under load.
//
//	go run ./tools/bench                 the full run (make bench), ~30 minutes
//	go run ./tools/bench -quick -out ''  a smoke run, ~3 minutes, nothing written
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	out      string
	clients  int
	duration time.Duration
	warm     time.Duration
	storm    int
	sizes    []int
	purge    int
	quick    bool
	sideOnly bool
	micro    bool
	execMode string
	logs     io.Writer
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o := options{sizes: []int{1_000, 10_000, 100_000, 1_000_000}}
	fs.StringVar(&o.out, "out", "docs/benchmarks.md", "write the report here as markdown; empty: print only")
	fs.IntVar(&o.clients, "clients", 16, "concurrent closed-loop clients in each throughput phase")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time of each throughput phase")
	fs.DurationVar(&o.warm, "warm", 2*time.Second, "unmeasured warm-up before each phase")
	fs.IntVar(&o.storm, "storm", 1000, "concurrent requests on one key in the retry storm")
	fs.IntVar(&o.purge, "purge", 1_000_000, "expired records the janitor purges under load")
	fs.BoolVar(&o.quick, "quick", false, "a smoke run: short phases, 1k and 10k records, a 20k purge")
	fs.BoolVar(&o.sideOnly, "side-only", false, "run only the side-by-side phases (a) to (g), no storm, growth or purge")
	fs.BoolVar(&o.micro, "micro", true, "measure allocations and callgrind instructions per request (builds internal/app's tests)")
	fs.StringVar(&o.execMode, "query-exec-mode", "", "pgx's default_query_exec_mode for every instance and the raw loop "+
		"(cache_statement, cache_describe, describe_exec, exec, simple_protocol); empty: pgx's default, cache_statement")
	verbose := fs.Bool("v", false, "show the servers' logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.quick {
		o.duration, o.warm, o.sizes, o.purge = 2*time.Second, 500*time.Millisecond, []int{1_000, 10_000}, 20_000
	}
	o.logs = io.Discard
	if *verbose {
		o.logs = os.Stderr
	}

	b, err := setUp(ctx, o, stdout)
	if err != nil {
		return err
	}
	defer b.close()

	rep := &report{started: time.Now(), opts: o, machine: describeMachine(ctx, b.pg), execMode: b.execMode}
	rep.main, err = b.sideBySide(ctx)
	if err != nil {
		return err
	}
	if rep.elsewhere, err = b.retryElsewhere(ctx); err != nil {
		return err
	}
	if rep.whole, err = b.wholeProcess(ctx); err != nil {
		return err
	}
	for _, x := range []struct {
		name string
		a    *api
	}{{"the API without Redis", b.plain}, {"the API with Redis", b.cached}} {
		if rss, err := peakRSS(x.a.pid); err == nil {
			rep.rss = append(rep.rss, rssRow{x.name, rss})
		}
	}
	if o.micro {
		if rep.micro, err = b.microFigures(ctx); err != nil {
			return err
		}
	} else {
		rep.micro.Note = "Run with -micro=false: no allocations or instruction counts"
	}
	if !o.sideOnly {
		if rep.storm, err = b.retryStorm(ctx); err != nil {
			return err
		}
		if rep.growth, err = b.growth(ctx); err != nil {
			return err
		}
		if rep.purge, err = b.purgeUnderLoad(ctx); err != nil {
			return err
		}
	}
	rep.finished = time.Now()
	rep.pgErrors, rep.pgKeyed, rep.pgErrorKinds = b.pgLog.errors(), b.pgLog.keys(), b.pgLog.errorKinds()

	text := rep.markdown()
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, text)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwritten to %s\n", o.out)
	}
	if failed := rep.failures(); len(failed) > 0 {
		return errors.New("requests failed during the run: " + fmt.Sprint(failed))
	}
	return nil
}
