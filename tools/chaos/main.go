// Command chaos proves the API's exactly-once promise under faults. It builds
// cmd/api and cmd/provider, starts real processes on loopback ports (three
// API instances, the mock provider, a private PostgreSQL cluster and a
// private redis-server, all through tools/harness), and runs scenarios
// that break things while clients retry: a retry storm on one key, provider
// chaos (lost answers, outages, latency), SIGKILLs of API instances, Redis
// and PostgreSQL killed under load, keys expiring, clients that retry
// through the repository's own client package, and a PostgreSQL failover
// (a primary of its own and a streaming standby that stops receiving, the
// primary's machine killed, the standby promoted), with asynchronous and
// with synchronous replication.
//
// After each scenario an audit compares the provider's ledger, the
// scenario's database and every answer any client received: at most one
// order per key and one charge per payment, no two different final answers
// for one key, no idempotency record left executing and no payment left
// unknown once the reconciler has had its time. The failover scenarios
// have an audit of their own (audit_failover.go): what the failover lost and
// whether any order was charged twice. The summary table is printed and
// written to docs/reliability.md. The command exits non-zero when an audit
// finds anything.
//
//	go run ./tools/chaos                  # the full profile (make chaos)
//	go run ./tools/chaos -profile short   # about a tenth of it (CI)
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

const usage = `Usage: chaos [-profile full|short] [-out docs/reliability.md] [-seed N] [-only name,...]

Builds cmd/api and cmd/provider, starts 3 API instances, the mock provider,
a private PostgreSQL cluster and a private redis-server on loopback ports,
runs the fault scenarios, audits each one, and prints the summary table
(written to -out as markdown unless -out is empty). Needs the PostgreSQL
server programs (initdb, postgres, psql, pg_basebackup) and redis-server.

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	profile string
	out     string
	seed    uint64
	only    string
	keep    bool
}

// run parses args, runs every scenario of the chosen profile, and writes the
// report. It returns an error when a scenario could not run or an audit found
// a duplicate, a stuck record or another violation.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("chaos", flag.ContinueOnError)
	flags.SetOutput(stdout)
	var o options
	flags.StringVar(&o.profile, "profile", "full", "full (the proof, under 10 minutes) or short (about a tenth, for CI)")
	flags.StringVar(&o.out, "out", "docs/reliability.md", "where to write the markdown report; empty: nowhere")
	flags.Uint64Var(&o.seed, "seed", 1, "seed of every random choice the harness makes (faults, kill times, payment methods)")
	flags.StringVar(&o.only, "only", "", "comma-separated scenario names to run (default: all)")
	flags.BoolVar(&o.keep, "keep-logs", false, "keep the processes' log folder even when every audit passes")
	flags.Usage = func() {
		fmt.Fprint(stdout, usage)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	p, err := profileNamed(o.profile)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.deadline)
	defer cancel()

	started := time.Now()
	sys, err := startSystem(ctx, o.seed, stdout)
	if err != nil {
		return err
	}
	defer sys.close(o.keep)

	rows, err := runScenarios(ctx, sys, p, o)
	rep := report{profile: p, seed: o.seed, rows: rows, started: started, elapsed: time.Since(started), logDir: sys.logDir}
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, rep.text())
	if err != nil {
		sys.keepLogs = true
		return err
	}
	// The report is written whether the audits pass or not: a finding is a
	// result too, and the file says which scenario failed and why.
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(rep.markdown()), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", o.out)
	}
	if failed := rep.failures(); failed > 0 {
		sys.keepLogs = true
		return fmt.Errorf("%d scenario(s) failed the audit; the processes' logs are kept in %s", failed, sys.logDir)
	}
	return nil
}
