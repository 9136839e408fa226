package app_test

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/testkit"
)

// benchClients is how many requests are in flight at once.
const benchClients = 32

// BenchmarkCreateOrder measures POST /v1/orders throughput over real HTTP,
// on each dialect, through the program's own wiring (app.New: with the
// idempotency middleware) and through the same program with the middleware
// replaced by a pass-through (app.WithOrdersMiddleware).
// Every request carries a fresh key, so the "with" side always executes and
// writes a record; it never replays. It ends by printing a table of the two
// rates and their ratio (medians when -count repeats the runs).
//
// Both sides are the same wiring, so the ratio measures the middleware and
// nothing else the program adds to the order path.
//
//	go test -run '^$' -bench BenchmarkCreateOrder -benchtime 5s -count 3 ./internal/app
func BenchmarkCreateOrder(b *testing.B) {
	type row struct{ with, without runs }
	rates := map[database.Dialect]*row{}
	for _, dialect := range testkit.Dialects {
		withURL, withoutURL := benchStacks(b, dialect)
		r := &row{}
		rates[dialect] = r
		b.Run(string(dialect)+"/with-idempotency", func(b *testing.B) {
			r.with.record(b, driveCreateOrder(b, withURL))
		})
		b.Run(string(dialect)+"/without-idempotency", func(b *testing.B) {
			r.without.record(b, driveCreateOrder(b, withoutURL))
		})
	}
	var t strings.Builder
	fmt.Fprintf(&t, "POST /v1/orders, %d concurrent clients, GOMAXPROCS=%d, median of the measured runs\n",
		clients(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(&t, "%-9s %6s %12s %12s %8s\n", "dialect", "runs", "with", "without", "ratio")
	for _, d := range testkit.Dialects {
		r := rates[d]
		with, without := r.with.final(), r.without.final()
		if len(with) == 0 || len(without) == 0 {
			continue // one side filtered out by -bench
		}
		fmt.Fprintf(&t, "%-9s %6d %12.0f %12.0f %8.2f\n", d, len(with), median(with), median(without), median(with)/median(without))
	}
	// b.Log from a benchmark with sub-benchmarks shows only under -v;
	// the table is the point of the run, so it goes to stdout.
	fmt.Print(t.String())
}

// benchStacks serves the API twice over one fresh database of the dialect
// and returns both base URLs: the program as app.New wires it, and the same
// program whose order routes run without the idempotency middleware.
func benchStacks(b *testing.B, dialect database.Dialect) (with, without string) {
	b.Helper()
	dbURL := testkit.DatabaseURL(b, dialect)
	env := apptest.Env("LOG_LEVEL=error", "DB_MAX_CONNS=20")
	with = apptest.Start(b, dbURL, env).URL
	// The order's outbox event is part of the business write, so the
	// "without" side writes it too: the order and its event in one
	// transaction, exactly as the "with" side minus the record.
	without = apptest.Start(b, dbURL, env, apptest.WithApp(app.WithOrdersMiddleware(func(*ginidem.Middleware) func(ginidem.Handler) gin.HandlerFunc {
		return handlers.Serve
	}))).URL
	return with, without
}

// runs keeps the rate of each measured run. The framework calls a
// sub-benchmark several times with a growing b.N until it fills -benchtime,
// and starts over with a new *testing.B for each -count: the last rate
// recorded for a given B is that run's measurement.
type runs struct {
	order []*testing.B
	rate  map[*testing.B]float64
}

func (r *runs) record(b *testing.B, rate float64) {
	if r.rate == nil {
		r.rate = map[*testing.B]float64{}
	}
	if _, ok := r.rate[b]; !ok {
		r.order = append(r.order, b)
	}
	r.rate[b] = rate
}

func (r *runs) final() []float64 {
	out := make([]float64, 0, len(r.order))
	for _, b := range r.order {
		out = append(out, r.rate[b])
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// clients is the number of goroutines driveCreateOrder really runs.
func clients() int { return max(1, benchClients/runtime.GOMAXPROCS(0)) * runtime.GOMAXPROCS(0) }

var benchKeys atomic.Int64

// driveCreateOrder posts orders with fresh keys from about benchClients
// goroutines and returns the rate it reached.
func driveCreateOrder(b *testing.B, baseURL string) float64 {
	transport := &http.Transport{MaxIdleConns: 2 * benchClients, MaxIdleConnsPerHost: 2 * benchClients}
	b.Cleanup(transport.CloseIdleConnections)
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	run := fmt.Sprintf("b%d", time.Now().UnixNano())
	var failed atomic.Int64

	// RunParallel starts SetParallelism × GOMAXPROCS goroutines.
	b.SetParallelism(max(1, benchClients/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a, err := apptest.Do(apptest.Request{Method: "POST", URL: baseURL + "/v1/orders", APIKey: "sk_test_acme",
				Key: fmt.Sprintf("%s-%d", run, benchKeys.Add(1)), Body: apptest.OrderBody, Client: client})
			if err != nil || a.Status != http.StatusCreated {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Errorf("%d of %d requests did not answer 201", n, b.N)
	}
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "req/s")
	return rate
}
