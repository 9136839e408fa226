package app_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// BenchmarkCreateOrderTracing measures what tracing costs on the create
// path: POST /v1/orders over real HTTP through the program's own wiring,
// on each dialect, with tracing off (no OTEL_* endpoint: nothing is
// installed) and on (OTEL_EXPORTER_OTLP_ENDPOINT set: every span of the
// request, its statements included, batched and exported over OTLP/HTTP to
// a sink that reads and drops each batch). Besides req/s it reports the
// process's user+system CPU per request (getrusage), which is the cost
// that matters on a busy instance; the load generator and the sink run in
// the same process, identically on both sides, so the difference between
// the two is the tracing's.
//
//	go test -run '^$' -bench BenchmarkCreateOrderTracing -benchtime 3000x -count 3 ./internal/app
func BenchmarkCreateOrderTracing(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	type result struct{ rate, cpu runs }
	results := map[string]*result{}
	var names []string
	for _, dialect := range testkit.Dialects {
		dbURL := testkit.DatabaseURL(b, dialect)
		// The new-key quota is raised: at its default (100 a second) the
		// benchmark would measure the limiter's 429s.
		env := []string{"LOG_LEVEL=error", "DB_MAX_CONNS=20", "RATE_LIMIT_NEW_KEYS=10000000", "RATE_LIMIT_WINDOW=1s"}
		for _, side := range []struct {
			name string
			env  []string
		}{
			{"tracing-off", env},
			{"tracing-on", append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.URL)},
		} {
			url := apptest.Start(b, dbURL, apptest.Env(side.env...)).URL
			name := string(dialect) + "/" + side.name
			names = append(names, name)
			r := &result{}
			results[name] = r
			b.Run(name, func(b *testing.B) {
				before := cpuTime(b)
				rate := driveCreateOrder(b, url)
				perReq := float64((cpuTime(b) - before).Microseconds()) / float64(b.N)
				b.ReportMetric(perReq, "cpu-µs/req")
				r.rate.record(b, rate)
				r.cpu.record(b, perReq)
			})
		}
	}
	var t strings.Builder
	fmt.Fprintf(&t, "POST /v1/orders, %d concurrent clients, GOMAXPROCS=%d, median of the runs\n", clients(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(&t, "%-22s %6s %10s %14s\n", "", "runs", "req/s", "cpu-µs/req")
	for _, n := range names {
		rate, cpu := results[n].rate.final(), results[n].cpu.final()
		if len(rate) == 0 {
			continue // filtered out by -bench
		}
		fmt.Fprintf(&t, "%-22s %6d %10.0f %14.0f\n", n, len(rate), median(rate), median(cpu))
	}
	for _, d := range testkit.Dialects {
		off, on := results[string(d)+"/tracing-off"].cpu.final(), results[string(d)+"/tracing-on"].cpu.final()
		if len(off) > 0 && len(on) > 0 {
			fmt.Fprintf(&t, "%-9s tracing adds %.0f cpu-µs per request (%+.0f%%)\n", d, median(on)-median(off), 100*(median(on)/median(off)-1))
		}
	}
	fmt.Print(t.String())
}

// cpuTime is the user+system CPU this process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
