// Command idemcheck tells whether an endpoint's Idempotency-Key handling is
// right: it runs a catalogue of black-box checks against the endpoint, each
// citing its rule (the IETF draft's section, Stripe's documented behaviour
// or this project's contract), and reports pass, fail, advice or not
// applicable with the requests and answers as evidence.
//
//	go install github.com/idemkeys/payments/cmd/idemcheck@latest
//	idemcheck -url https://api.example.com/v1/orders -H 'Authorization: Bearer …' \
//	          -body @order.json -body-variant @order-other.json -allow-effects
//
// It imports only the standard library and its own check package, so
// installing it builds nothing else. It is safe by default: it prints its
// plan (how many requests, how many effects at worst) and sends nothing
// without -allow-effects, never more than -max-requests, only to the URLs
// given, and never retries. The exit status is 0 when no check failed, 1
// when one failed or could not be run, 2 for a usage error or a refused plan,
// and 3 when none failed but one was not judged (its input did not bring
// about what it checks).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkeys/payments/internal/idemcheck"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	// exitNotJudged: nothing failed, but a check asked for gave no
	// verdict, so a pipeline does not pass on a check that never happened.
	exitNotJudged = 3
)

// headerFlags collects repeated -H 'Name: value' flags.
type headerFlags struct{ h http.Header }

func (f *headerFlags) String() string { return "" }

func (f *headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("want 'Name: value', got %q", s)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(name, strings.TrimSpace(value))
	return nil
}

// run is the whole program, callable from tests.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var (
		cfg idemcheck.Config
		f   cliFlags
	)
	fs := newFlagSet(&cfg, &f, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if f.list {
		listChecks(stdout)
		return exitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idemcheck: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if f.format != "text" && f.format != "json" && f.format != "junit" {
		fmt.Fprintf(stderr, "idemcheck: -format must be text, json or junit, not %q\n", f.format)
		return exitUsage
	}
	cfg.Header, cfg.Header2 = f.h1.h, f.h2.h
	if err := f.readBodies(&cfg, fs, stdin); err != nil {
		fmt.Fprintf(stderr, "idemcheck: %v\n", err)
		return exitUsage
	}
	var ids []string
	if f.checks != "" {
		for _, id := range strings.Split(f.checks, ",") {
			ids = append(ids, strings.TrimSpace(id))
		}
	}
	client := idemcheck.DefaultClient()
	client.Timeout = f.timeout
	cfg.Client = client

	p, err := idemcheck.PlanFor(cfg, ids...)
	if err != nil {
		fmt.Fprintf(stderr, "idemcheck: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "idemcheck %s %s\n%s", cfg.Method, idemcheck.RedactURL(cfg.URL), p)
	if f.planOnly {
		return exitOK
	}
	if !cfg.AllowEffects {
		fmt.Fprintln(stderr, "nothing sent: add -allow-effects to run the checks (point it at a test environment: the checks create what the endpoint creates)")
		return exitUsage
	}
	if cfg.MaxRequests > 0 && p.Requests > cfg.MaxRequests {
		fmt.Fprintf(stderr, "nothing sent: the plan is over -max-requests %d; raise it, lower -n, or pick checks with -checks\n", cfg.MaxRequests)
		return exitUsage
	}

	progress, terminal := progressLine(stderr)
	cfg.Progress = progress
	rep, err := idemcheck.Run(ctx, cfg, ids...)
	if terminal {
		fmt.Fprint(stderr, "\r\033[K") // clear the progress line
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemcheck: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "done: %d requests, %s\n", rep.Requests, rep.Summary())
	return f.writeReport(rep, stdout, stderr)
}

// cliFlags is what the command line sets beside idemcheck.Config.
type cliFlags struct {
	h1, h2                                        headerFlags
	body, variant, invalid, fault, checks, format string
	outFile                                       string
	planOnly, list, verbose                       bool
	timeout                                       time.Duration
}

// newFlagSet defines idemcheck's flags, into cfg and f.
func newFlagSet(cfg *idemcheck.Config, f *cliFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("idemcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.URL, "url", "", "the endpoint under test (required); {{unique}} is replaced by a new value per operation")
	fs.StringVar(&cfg.Method, "X", "POST", "the endpoint's method")
	fs.Var(&f.h1, "H", "a request header, 'Name: value' (repeat it): the credentials, Content-Type")
	fs.Var(&f.h2, "H2", "a header of other credentials (another client), replacing -H's of the same name; enables the credentials check")
	fs.StringVar(&cfg.KeyHeader, "key-header", "Idempotency-Key", "the name of the key's header")
	fs.BoolVar(&cfg.KeyOptional, "key-optional", false, "the endpoint accepts requests without a key (key-missing does not apply)")
	fs.Var(&statuses{&cfg.FinalStatus}, "final-status", "402 or 409, comma-separated: a status the endpoint answers -body with as its own stored outcome (a decline, a conflict), taken as an answer rather than a failure")
	fs.StringVar(&f.body, "body", "", "the request body: JSON text, or @file (@- for standard input)")
	fs.StringVar(&f.variant, "body-variant", "", "another valid body for the same endpoint, text or @file (reuse-body)")
	fs.StringVar(&cfg.URLVariant, "url-variant", "", "another path of the same API the key must not reach (reuse-path)")
	fs.StringVar(&cfg.MethodVariant, "method-variant", "", "another method for the same URL, such as PUT (reuse-method)")
	fs.StringVar(&f.invalid, "body-invalid", "", "a body the endpoint refuses by validation, text or @file (no-burn)")
	fs.StringVar(&f.fault, "body-5xx", "", "a body the endpoint answers with 5xx before any effect, text or @file (no-5xx-replay)")
	fs.StringVar(&cfg.EffectsURL, "effects-url", "", "a URL answering, to GET with -H, JSON holding the count of effects")
	fs.StringVar(&cfg.EffectsPointer, "effects-pointer", "", "JSON pointer to the count in the effects answer: a number, or an array counted by its length")
	fs.IntVar(&cfg.Concurrency, "n", 30, "copies sent at once by the concurrent check")
	fs.DurationVar(&cfg.Pause, "pause", 3*time.Second, "how long pause-replay waits before its replay")
	fs.DurationVar(&cfg.TTL, "ttl", 0, "how long the endpoint replays a key's answer; expiry-race waits that long, then sends -n copies at once (at most 5m; default: expiry-race does not apply)")
	fs.DurationVar(&cfg.LockTimeout, "lock-timeout", 30*time.Second, "how long the endpoint keeps a key locked by a request that never answered; no-crash-lock fails a key locked longer after a failure (at most 5m)")
	fs.IntVar(&cfg.MaxRequests, "max-requests", 200, "refuse a plan of more requests than this, and never send more")
	fs.BoolVar(&cfg.AllowEffects, "allow-effects", false, "send the requests: without it, only the plan is printed")
	fs.BoolVar(&f.planOnly, "plan", false, "print the plan and exit 0")
	fs.StringVar(&f.checks, "checks", "", "comma-separated ids of the checks to run (default: all; see -list)")
	fs.StringVar(&f.format, "format", "text", "report format: text, json or junit")
	fs.StringVar(&f.outFile, "o", "", "write the report to this file instead of standard output")
	fs.BoolVar(&f.verbose, "v", false, "text format: show the evidence of passing checks too")
	fs.BoolVar(&f.list, "list", false, "list the checks, their rules and sources, and exit")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "timeout of one request")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: idemcheck -url URL [-H 'Name: value']... -body @file [flags] -allow-effects

Checks an endpoint's Idempotency-Key handling against the IETF draft
(draft-ietf-httpapi-idempotency-key-header-07), Stripe's documented behaviour
and the rules of github.com/idemkeys/payments. Without -allow-effects it only
prints its plan. Exit status: 0 no check failed, 1 a check failed or could not
run, 2 usage error or refused plan, 3 none failed but one was not judged.

`)
		fs.PrintDefaults()
	}
	return fs
}

// listChecks prints every check with its rule, source and needs (-list).
func listChecks(stdout io.Writer) {
	for _, c := range idemcheck.Checks() {
		fmt.Fprintf(stdout, "%s (%s)\n  %s\n  source: %s\n", c.ID, c.Level, c.Rule, c.Source)
		if c.Needs != "" {
			fmt.Fprintf(stdout, "  needs: %s\n", c.Needs)
		}
	}
}

// readBodies reads into cfg the bodies given on the command line, each as
// text or @file; a flag not given leaves its body unset.
func (f *cliFlags) readBodies(cfg *idemcheck.Config, fs *flag.FlagSet, stdin io.Reader) error {
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, b := range []struct {
		flag string
		in   string
		out  *[]byte
	}{{"body", f.body, &cfg.Body}, {"body-variant", f.variant, &cfg.BodyVariant}, {"body-invalid", f.invalid, &cfg.InvalidBody}, {"body-5xx", f.fault, &cfg.FaultBody}} {
		if !given[b.flag] {
			continue
		}
		data, err := readBody(b.in, stdin)
		if err != nil {
			return fmt.Errorf("-%s: %w", b.flag, err)
		}
		*b.out = data
	}
	return nil
}

// writeReport writes rep in the format asked for, to -o or stdout, and
// returns the exit status it earns.
func (f *cliFlags) writeReport(rep *idemcheck.Report, stdout, stderr io.Writer) int {
	out := stdout
	if f.outFile != "" {
		file, err := os.Create(f.outFile)
		if err != nil {
			fmt.Fprintf(stderr, "idemcheck: %v\n", err)
			return exitUsage
		}
		defer file.Close()
		out = file
	}
	var err error
	switch f.format {
	case "json":
		err = rep.WriteJSON(out)
	case "junit":
		err = rep.WriteJUnit(out)
	default:
		err = rep.WriteText(out, f.verbose)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemcheck: writing the report: %v\n", err)
		return exitFailed
	}
	switch {
	case rep.Failed():
		return exitFailed
	case rep.Incomplete():
		return exitNotJudged
	}
	return exitOK
}

// readBody reads a body flag that was given: @file, @- for standard
// input, or the text. An empty body is refused, and so is text that names
// a file: both are mistakes that would send a body nobody meant, which
// the endpoint refuses, or worse, accepts.
func readBody(v string, stdin io.Reader) ([]byte, error) {
	var data []byte
	var err error
	switch {
	case v == "":
		return nil, errors.New("the body is empty; give JSON text, @file or @- (leave the flag out for an endpoint that takes no body)")
	case v == "@-":
		data, err = io.ReadAll(stdin)
	case strings.HasPrefix(v, "@"):
		data, err = os.ReadFile(v[1:])
	default:
		if st, err := os.Stat(v); err == nil && st.Mode().IsRegular() {
			return nil, fmt.Errorf("%q names a file, and would be sent as text; write @%s to send its content", v, v)
		}
		return []byte(v), nil
	}
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s is empty", v)
	}
	return data, nil
}

// statuses collects a comma-separated list of HTTP statuses.
type statuses struct{ list *[]int }

func (f *statuses) String() string {
	if f.list == nil {
		return ""
	}
	return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(*f.list)), ","), "[]")
}

func (f *statuses) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return fmt.Errorf("want statuses such as 402,409, got %q", s)
		}
		*f.list = append(*f.list, n)
	}
	return nil
}

// progressLine returns a Progress function that keeps one line up to date
// on a terminal, and prints a line per check elsewhere (a CI log).
func progressLine(w io.Writer) (progress func(idemcheck.Progress), terminal bool) {
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			terminal = true
		}
	}
	lastStep := 0
	return func(p idemcheck.Progress) {
		if terminal {
			fmt.Fprintf(w, "\r[%d/%d] %-40s %d/%d requests", p.Step, p.Steps, p.Check, p.Sent, p.Planned)
			return
		}
		if p.Step != lastStep {
			lastStep = p.Step
			fmt.Fprintf(w, "[%d/%d] %s (%d/%d requests sent)\n", p.Step, p.Steps, p.Check, p.Sent, p.Planned)
		}
	}, terminal
}
