package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/testkit"
)

// micro holds the figures that do not move with the machine's load: for a
// create, a traced create and a replay through the program's handler
// (BenchmarkHandler in internal/app, PostgreSQL, no socket), the
// allocations per request and the instructions per request that callgrind
// counts.
type micro struct {
	// Allocs and Bytes are per request, by path ("create", "traced",
	// "replay").
	Allocs, Bytes map[string]int64
	// Instructions is per request, by path; empty without valgrind.
	Instructions map[string]float64
	// Note says what was not measured, and why.
	Note string
}

// benchLine is one result line of go test -bench -benchmem.
var benchLine = regexp.MustCompile(`^BenchmarkHandler/postgres/(\w+)-\d+\s+\d+\s+[\d.]+ ns/op\s+(\d+) B/op\s+(\d+) allocs/op`)

// microFigures builds internal/app's test binary and runs BenchmarkHandler
// on the bench's PostgreSQL, once with -benchmem and, when valgrind is on
// the PATH, under callgrind at two iteration counts: the difference of the
// handler's inclusive instruction count between them, over the difference
// of iterations, is what one request costs, start-up and warm-up cancelled
// out.
func (b *bench) microFigures(ctx context.Context) (micro, error) {
	m := micro{Allocs: map[string]int64{}, Bytes: map[string]int64{}, Instructions: map[string]float64{}}
	bin := filepath.Join(b.dir, "app.test")
	b.say("micro: building internal/app's test binary")
	// Without cgo: callgrind cannot follow cgo's thread start.
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, testkit.Module+"internal/app")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return m, fmt.Errorf("build internal/app's tests: %w\n%s", err, out)
	}
	// The garbage collector's target of the program (cmd/api), which a
	// test binary does not set by itself.
	env := append(os.Environ(), "TEST_DATABASE_URL="+b.dbURL, "GOGC="+strconv.Itoa(app.GCPercent))
	runBench := func(pattern string, n int, wrap ...string) ([]byte, error) {
		args := append(wrap, bin, "-test.run", "^$", "-test.bench", pattern, "-test.benchmem",
			"-test.benchtime", strconv.Itoa(n)+"x")
		godebug, procs := "GODEBUG=asyncpreemptoff=1", []string(nil)
		if len(wrap) > 0 {
			// Under valgrind, the runtime reads the clock with RDTSC:
			// valgrind passes on the processor's word that it has RDTSCP,
			// which it cannot run itself (the program dies at the first).
			// One P: callgrind runs one thread at a time anyway, and
			// threads that spin looking for work would count as work.
			godebug, procs = godebug+",cpu.rdtscp=off", []string{"GOMAXPROCS=1"}
		}
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir, cmd.Env = b.dir, slices.Concat(env, procs, []string{godebug})
		return cmd.CombinedOutput()
	}

	n := 3000
	if b.opts.quick {
		n = 300
	}
	b.say("micro: allocations per request (BenchmarkHandler, %d iterations)", n)
	out, err := runBench("^BenchmarkHandler$/^postgres$", n)
	if err != nil {
		return m, fmt.Errorf("BenchmarkHandler: %w\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := benchLine.FindStringSubmatch(sc.Text()); f != nil {
			m.Bytes[f[1]], _ = strconv.ParseInt(f[2], 10, 64)
			m.Allocs[f[1]], _ = strconv.ParseInt(f[3], 10, 64)
		}
	}
	if len(m.Allocs) == 0 {
		return m, fmt.Errorf("BenchmarkHandler printed no results:\n%s", out)
	}

	if _, err := exec.LookPath("valgrind"); err != nil {
		m.Note = "valgrind is not on the PATH: no instruction counts"
		return m, nil
	}
	for _, path := range []string{"create", "traced", "sampled", "replay", "elsewhere"} {
		// A replay costs a tenth of a create: more of them, for a
		// difference well above the noise of the garbage collector.
		low, high := 300, 900
		if path == "replay" {
			low, high = 2000, 8000
		}
		if b.opts.quick {
			low, high = low/5, high/5
		}
		var counts [2]float64
		for i, iterations := range []int{low, high} {
			b.say("micro: callgrind on the %s path, %d iterations", path, iterations)
			file := filepath.Join(b.dir, fmt.Sprintf("callgrind.%s.%d", path, iterations))
			out, err := runBench("^BenchmarkHandler$/^postgres$/^"+path+"$", iterations,
				"valgrind", "--tool=callgrind", "--callgrind-out-file="+file)
			if err != nil {
				// Valgrind lags behind processors: one that does not know an
				// instruction the Go runtime uses on this CPU kills the
				// program. The run's other figures stand.
				m.Instructions = map[string]float64{}
				m.Note = "callgrind could not run the benchmark here (" + callgrindFailure(out, err) + "): no instruction counts"
				b.say("micro: %s", m.Note)
				return m, nil
			}
			if counts[i], err = collected(out); err != nil {
				return m, err
			}
		}
		m.Instructions[path] = (counts[1] - counts[0]) / float64(high-low)
	}
	// The elsewhere benchmark creates each key on one instance (its timer
	// stopped, which callgrind does not see) and retries it on another:
	// less a create, what the retry costs.
	m.Instructions["elsewhere"] -= m.Instructions["create"]
	return m, nil
}

// collectedLine is callgrind's total of the instructions the program ran.
var collectedLine = regexp.MustCompile(`Collected : (\d+)`)

// collected is the instructions that callgrind counted in the whole
// program, out being what valgrind printed. With one P (GOMAXPROCS=1) that
// is the handler's work, the garbage collections it causes, the test's
// building of each request, and the background workers' polls, the last
// two small beside a request. It is counted rather than the handler's
// inclusive cost: callgrind follows the calls of each thread, and Go's
// goroutines change threads, so a function's inclusive count came out
// different from one run to the next (94,296 and 51,270 instructions per
// replay in two runs of the same binary, against 94,509 and 94,377 for the
// whole program).
func collected(out []byte) (float64, error) {
	m := collectedLine.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("valgrind printed no instruction total:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// callgrindFailure is the line of valgrind's output that says why it
// stopped, or err.
func callgrindFailure(out []byte, err error) string {
	for line := range strings.Lines(string(out)) {
		if i := strings.Index(line, "valgrind: "); i >= 0 {
			return strings.TrimSpace(line[i:])
		}
	}
	return err.Error()
}
