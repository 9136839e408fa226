package app_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/idemkeys/payments/internal/app"
	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/testkit"
)

// BenchmarkHandler is the API's own work on a create and a replay, through
// the program's handler (app.New) with no socket in between: its
// allocations per request, which do not move with the machine's load, and
// its time, which does. The database is real.
//
//	go test -run '^$' -bench BenchmarkHandler -benchmem ./internal/app
func BenchmarkHandler(b *testing.B) {
	for _, dialect := range testkit.Dialects {
		b.Run(string(dialect), func(b *testing.B) {
			dbURL := testkit.DatabaseURL(b, dialect)
			h := benchHandler(b, dbURL)
			b.Run("create", func(b *testing.B) { creates(b, h, "bench-") })
			b.Run("traced", func(b *testing.B) {
				// The create again on an instance with tracing on, every
				// span exported over OTLP/HTTP to a sink that drops them.
				traced := benchHandler(b, testkit.DatabaseURL(b, dialect), "OTEL_EXPORTER_OTLP_ENDPOINT="+spanSink(b))
				creates(b, traced, "traced-")
			})
			b.Run("sampled", func(b *testing.B) {
				// The same at one trace in ten, parent-based, as the guide
				// sets it for production: nine creates in ten record
				// nothing and build no span attributes. The SDK reads its
				// sampler from the process's environment.
				b.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
				b.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.1")
				sampled := benchHandler(b, testkit.DatabaseURL(b, dialect), "OTEL_EXPORTER_OTLP_ENDPOINT="+spanSink(b))
				creates(b, sampled, "sampled-")
			})
			b.Run("elsewhere", func(b *testing.B) {
				// A retry on another instance: keys created on h (not
				// timed), each retried once on an instance of its own on
				// the same database, which has never seen them and reads
				// each record from the database.
				other := benchHandler(b, dbURL)
				prefix := "elsewhere-" + apptest.NewKey() + "-"
				b.StopTimer()
				for i := range b.N {
					if code := serveOrder(h, prefix+strconv.Itoa(i)); code != http.StatusCreated {
						b.Fatalf("status %d", code)
					}
				}
				b.ReportAllocs()
				b.StartTimer()
				for i := range b.N {
					if code := serveOrder(other, prefix+strconv.Itoa(i)); code != http.StatusCreated {
						b.Fatalf("status %d", code)
					}
				}
			})
			b.Run("replay", func(b *testing.B) {
				if code := serveOrder(h, "bench-replay"); code != http.StatusCreated {
					b.Fatalf("status %d", code)
				}
				b.ReportAllocs()
				for b.Loop() {
					if code := serveOrder(h, "bench-replay"); code != http.StatusCreated {
						b.Fatalf("status %d", code)
					}
				}
			})
		})
	}
}

// creates sends h one create per iteration, each under a key of its own,
// new in every run of the benchmark (-count runs it again on the same
// database).
func creates(b *testing.B, h http.Handler, prefix string) {
	b.ReportAllocs()
	prefix += apptest.NewKey() + "-"
	n := 0
	for b.Loop() {
		n++
		if code := serveOrder(h, prefix+strconv.Itoa(n)); code != http.StatusCreated {
			b.Fatalf("status %d", code)
		}
	}
}

func benchHandler(b *testing.B, dbURL string, settings ...string) http.Handler {
	b.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	// As tools/bench runs the API: the new-key limiter counting every key
	// at a quota the loop never reaches, tombstones on.
	cfg, err := config.Load(append([]string{"DATABASE_URL=" + dbURL, "LOG_LEVEL=error", "HTTP_ADDR=" + ln.Addr().String(),
		"RATE_LIMIT_NEW_KEYS=10000000", "RATE_LIMIT_WINDOW=1s", "IDEMPOTENCY_TOMBSTONES=true"}, settings...))
	if err != nil {
		b.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, app.NewLogger(io.Discard, cfg.LogLevel), ln)
	if err != nil {
		b.Fatal(err)
	}
	return a.Handler()
}

// spanSink is the URL of an OTLP/HTTP receiver that reads and drops what
// it is sent.
func spanSink(b *testing.B) string {
	b.Helper()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	return sink.URL
}

var benchOrder = []byte(apptest.OrderBody)

// serveOrder sends h one create under key and returns its status. The
// request is built as net/http's server hands one over (RequestURI,
// RemoteAddr), without httptest.NewRequest, which parses it from text
// through a bufio.Reader of 4 KB of its own per request: a fifth of the
// bytes a create allocated, none of them the API's.
func serveOrder(h http.Handler, key string) int {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/orders", bytes.NewReader(benchOrder))
	if err != nil {
		panic(err)
	}
	req.RequestURI, req.RemoteAddr = "/v1/orders", "192.0.2.1:1234"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk_test_acme")
	req.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code
}
