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
	"strconv"
	"strings"

	"github.com/idemkeys/payments/internal/testkit"
)

// micro holds the figures that do not move with the machine's load: for a
// create and a replay through the program's handler (BenchmarkHandler in
// internal/app, PostgreSQL, no socket), the allocations per request and the
// instructions per request that callgrind counts.
type micro struct {
	// Allocs and Bytes are per request, by path ("create", "replay").
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
	env := append(os.Environ(), "TEST_DATABASE_URL="+b.dbURL, "GODEBUG=asyncpreemptoff=1")
	runBench := func(pattern string, n int, wrap ...string) ([]byte, error) {
		args := append(wrap, bin, "-test.run", "^$", "-test.bench", pattern, "-test.benchmem",
			"-test.benchtime", strconv.Itoa(n)+"x")
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir, cmd.Env = b.dir, env
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
	for _, path := range []string{"create", "replay"} {
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
			if out, err := runBench("^BenchmarkHandler$/^postgres$/^"+path+"$", iterations,
				"valgrind", "--tool=callgrind", "--callgrind-out-file="+file); err != nil {
				// Valgrind lags behind processors: one that does not know an
				// instruction the Go runtime uses on this CPU (RDTSCP, for
				// one) kills the program. The run's other figures stand.
				m.Instructions = map[string]float64{}
				m.Note = "callgrind could not run the benchmark here (" + callgrindFailure(out, err) + "): no instruction counts"
				b.say("micro: %s", m.Note)
				return m, nil
			}
			if counts[i], err = handlerInstructions(ctx, file); err != nil {
				return m, err
			}
		}
		m.Instructions[path] = (counts[1] - counts[0]) / float64(high-low)
	}
	return m, nil
}

// handlerInstructions is the inclusive instruction count of gin's
// Engine.ServeHTTP in a callgrind output file: all the handler did, and
// nothing the test or the background workers did.
func handlerInstructions(ctx context.Context, file string) (float64, error) {
	out, err := exec.CommandContext(ctx, "callgrind_annotate", "--inclusive=yes", "--threshold=100", file).Output()
	if err != nil {
		return 0, fmt.Errorf("callgrind_annotate: %w", err)
	}
	for line := range strings.Lines(string(out)) {
		if !strings.Contains(line, "gin.(*Engine).ServeHTTP [") {
			continue
		}
		fields := strings.Fields(line)
		return strconv.ParseFloat(strings.ReplaceAll(fields[0], ",", ""), 64)
	}
	return 0, fmt.Errorf("%s: no gin.(*Engine).ServeHTTP", file)
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
