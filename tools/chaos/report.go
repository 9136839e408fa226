package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/tools/harness"
)

// row is one scenario's line in the summary, with its details.
type row struct {
	scenario, about string
	requests        int64
	faults          string
	audit           auditResult
	p50, p99        time.Duration
	statuses        string
	load, total     time.Duration
	// failover holds the failover scenarios' own figures; nil for the
	// others.
	failover *failoverFigures
}

// effects says what the scenario left behind.
func (r row) effects() string {
	a := r.audit
	s := fmt.Sprintf("%s, %s (%s ok, %s declined)",
		count(a.orders, "order"), count(a.charges, "charge"), thousands(a.succeeded), thousands(a.declined))
	if a.refunds > 0 {
		s += ", " + count(a.refunds, "refund")
	}
	s += fmt.Sprintf(", %s (%d unhandled)", count(a.orphans, "orphan"), a.unhandledOrphans)
	return s
}

// count spells n things, "1 order" or "2,000 orders".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return thousands(n) + " " + thing + "s"
}

func (r row) passed() bool { return len(r.audit.violations) == 0 }

func (r row) summary() string {
	verdict := "PASS"
	if !r.passed() {
		verdict = fmt.Sprintf("FAIL (%d findings)", len(r.audit.violations))
	}
	return fmt.Sprintf("%s: %d requests, %s; %s; duplicates %d, stuck %d; p50 %.1f ms, p99 %.1f ms; %s",
		verdict, r.requests, r.faults, r.effects(), r.audit.duplicates, r.audit.stuck,
		harness.Millis(r.p50), harness.Millis(r.p99), r.total.Round(time.Second))
}

// report is the whole run.
type report struct {
	profile profile
	seed    uint64
	rows    []row
	started time.Time
	elapsed time.Duration
	logDir  string
}

func (r report) failures() int {
	n := 0
	for _, row := range r.rows {
		if !row.passed() {
			n++
		}
	}
	return n
}

// text is the table for a terminal, with every finding below it.
func (r report) text() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\trequests\tfaults injected\teffects\tduplicates\tstuck\tp50 ms\tp99 ms")
	for _, row := range r.rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%.1f\t%.1f\n", row.scenario, row.requests, row.faults, row.effects(),
			row.audit.duplicates, row.audit.stuck, harness.Millis(row.p50), harness.Millis(row.p99))
	}
	_ = tw.Flush()
	if rows := r.failoverRows(); len(rows) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "failover\tacknowledged lost\tleft executing\tmost net charges per order\torders charged twice\trefunded twice\tswept charges/refunds\tevents again/twice\tfailed requests\tunavailable\treconnect")
		for _, row := range rows {
			f := row.failover
			fmt.Fprintf(tw, "%s\t%d of %d\t%d\t%d\t%d\t%d\t%d/%d\t%d/%d\t%d\t%.1f s\t%.1f s\n", row.scenario, f.lost, f.acknowledged,
				f.executing, f.maxNetCharges, f.chargedTwice, f.refundedTwice, f.sweptCharges, f.sweptRefunds, f.eventsAgain, f.eventsTwice,
				f.failed, f.unavailable.Seconds(), f.reconnect.Seconds())
		}
		_ = tw.Flush()
	}
	r.writeFindings(&b, "  ")
	fmt.Fprintf(&b, "profile %s, seed %d, %s\n", r.profile.name, r.seed, r.elapsed.Round(time.Second))
	return b.String()
}

// markdown is docs/reliability.md.
func (r report) markdown() string {
	var b strings.Builder
	cmd := "make chaos"
	if r.profile.name != "full" || r.seed != 1 {
		cmd = fmt.Sprintf("go run ./tools/chaos -profile %s -seed %d", r.profile.name, r.seed)
	}
	fmt.Fprintf(&b, `# Reliability under faults

This file is written by `+"`%s`"+` (`+"`tools/chaos`"+`); do not edit it by hand.
Run the same command to repeat it: every random choice (faults, kill times,
payment methods) comes from the seed, so a run meets the same kind and number
of faults, though not at the same instants.

`, cmd)
	fmt.Fprintf(&b, "- **Run:** %s, profile `%s`, seed %d, %s in all (build included).\n",
		r.started.UTC().Format("2006-01-02 15:04 MST"), r.profile.name, r.seed, r.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "- **Machine:** %s; %d cores; %s; %s; %s.\n", cpuModel(), runtime.NumCPU(), runtime.Version(),
		programVersion("postgres", "--version"), programVersion("redis-server", "--version"))
	fmt.Fprintf(&b, "- **Code:** commit `%s`.\n", commit())
	b.WriteString(`- **System:** 3 API instances (cmd/api) on one PostgreSQL database and one
  redis-server, the mock provider (cmd/provider) with its webhooks sent to
  the instances through a balancer, all real processes on loopback ports; a
  fresh database and provider ledger per scenario (the failover scenarios:
  a primary and a standby of their own, described below). The instances run with
  IDEMPOTENCY_LOCK_TIMEOUT=2s, IDEMPOTENCY_WAIT=1s, RECONCILE_INTERVAL=500ms
  and PROVIDER_TIMEOUT=1s, so that crashed requests are taken over and
  unknown outcomes resolved within a scenario.

`)
	b.WriteString("| scenario | requests | faults injected | effects | duplicates | stuck records | p50 | p99 |\n")
	b.WriteString("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, row := range r.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %d | %.1f ms | %.1f ms |\n", row.scenario, thousands(int(row.requests)),
			row.faults, row.effects(), row.audit.duplicates, row.audit.stuck, harness.Millis(row.p50), harness.Millis(row.p99))
	}
	b.WriteString(`
**Requests** are HTTP requests the clients sent, retries included; p50 and
p99 are their latencies, one request each (not one operation with its
retries), failed ones included. **Effects** are what the database and the
provider's ledger hold afterwards. **Duplicates** count orders beyond one per
idempotency key, payments beyond one per key, charges beyond one per payment
or one successful charge per order, and keys whose clients were given two
different final answers. **Stuck records** count idempotency records still
executing and payments or refunds still pending or processing once the
audit's settle period (the reconciler's time) is over.

## What each scenario does

`)
	for _, row := range r.rows {
		fmt.Fprintf(&b, "- **%s**: %s Answers the clients got: %s. The system settled %s after the load.\n",
			row.scenario, row.about, row.statuses, row.audit.settleTook.Round(100*time.Millisecond))
	}
	r.writeFailover(&b)
	if n := r.failures(); n > 0 {
		fmt.Fprintf(&b, "\n## Findings: %d scenario(s) FAILED\n\n", n)
		r.writeFindings(&b, "- ")
	} else {
		b.WriteString("\nEvery audit passed: no duplicate, no stuck record, no other finding.\n")
	}
	b.WriteString(`
## What the audit checks

After each scenario the harness waits (polling, up to the settle period) for
nothing to be left executing or unknown, then reads the scenario's database
directly, the provider's whole ledger (` + "`GET /v1/ledger`" + ` of the mock
provider) and every answer that any client received (status and a hash of
the body, per key), and checks:

- at most one order per key (the key is in the order's metadata), one
  payment per key, one succeeded payment per order;
- at most one charge per payment (by its reference) and one successful charge
  per order, every charge made under its payment's provider key, and no
  charge that no payment knows of;
- each payment's final status is its charge's (succeeded, declined), and an
  order is paid exactly when it has a succeeded payment;
- no idempotency record still executing, no payment or refund still pending
  or processing;
- no orphan left unhandled: a succeeded charge the provider holds for a
  payment we consider canceled or failed must have been refunded in full,
  and a succeeded refund of a refund we consider canceled or failed is a
  finding (the effects column counts both kinds);
- a completed record has its effect (an order, a payment in the answered
  status), and an order has its record;
- per key, no two different final answers (2xx but 202, 402, the 409s the
  API keeps, as internal/handlers/keep.go lists them), each equal
  byte for byte to the stored one, and each naming the key's own order or
  payment in the status the database holds;
- no answer outside what the contract allows for the scenario (a 500, a 422).

Any finding fails the run (` + "`make chaos`" + ` exits non-zero) and keeps the
processes' logs.
`)
	return b.String()
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 10000 && n > -10000 {
		return s
	}
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func programVersion(name string, args ...string) string {
	path, err := testkit.LookPath(name, harness.PostgresBinaries)
	if err != nil {
		return name + " (unknown version)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).Output()
	if err != nil {
		return name + " (unknown version)"
	}
	v := strings.TrimSpace(string(out))
	if name == "redis-server" { // "Redis server v=7.0.15 sha=... malloc=..."
		if _, after, ok := strings.Cut(v, "v="); ok {
			v = "Redis " + strings.Fields(after)[0]
		}
	}
	return v
}

func commit() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += " plus uncommitted changes"
	}
	return c
}

// writeFindings lists each scenario's audit violations, at most 20 a
// scenario, each line starting with lead.
func (r report) writeFindings(w io.Writer, lead string) {
	for _, row := range r.rows {
		for i, v := range row.audit.violations {
			if i == 20 {
				fmt.Fprintf(w, "%s%s: … %d more\n", lead, row.scenario, len(row.audit.violations)-i)
				break
			}
			fmt.Fprintf(w, "%s%s: %s\n", lead, row.scenario, v)
		}
	}
}
