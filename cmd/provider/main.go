// Command provider runs the mock payment provider as its own HTTP service,
// for running the API against a separate process and for load tests with
// injected faults. The API starts the same provider in-process when its
// PROVIDER_URL is empty.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/tracing"
)

// shutdownTimeout bounds the wait for in-flight requests at shutdown.
const shutdownTimeout = 10 * time.Second

const usage = `Usage: provider

Runs the mock payment provider. Configured by the environment:

  HTTP_ADDR                 listen address [:8081]
  WEBHOOK_URL               where to POST signed events, e.g.
                            http://localhost:8080/v1/webhooks/provider [empty: no webhooks]
  WEBHOOK_SECRET            HMAC secret for Provider-Signature [whsec_test]
  DUPLICATE_WEBHOOK_RATE    share of events sent twice on purpose, 0..1 [0.1]
  CHAOS_LOST_RESPONSE_RATE  share of first requests whose answer is lost, 0..1 [0]
  CHAOS_UNAVAILABLE_RATE    share of first requests answered 503, 0..1 [0]
  CHAOS_LATENCY             most random latency added to first requests, e.g. 50ms [0]
  OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
                            send traces there over OTLP/HTTP, continuing the
                            caller's (W3C traceparent) [empty: no tracing]
  OTEL_TRACES_EXPORTER      otlp, or none to turn tracing off [otlp]
  OTEL_SERVICE_NAME         the service name in traces [payments-provider]
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "provider:", err)
		os.Exit(1)
	}
}

// run serves the provider until ctx is done, then shuts it down gracefully.
// Logs go to stdout as JSON.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	flags := flag.NewFlagSet("provider", flag.ContinueOnError)
	flags.SetOutput(stdout)
	flags.Usage = func() { fmt.Fprint(stdout, usage) }
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q; configure with environment variables (-h lists them)", flags.Args())
	}

	addr, cfg, traces, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(stdout, nil)))
	cfg.Logger = log

	tr, err := tracing.Start(ctx, serviceName, traces, log.With("component", "tracing"))
	if err != nil {
		return err
	}
	defer func() {
		// After the server has stopped: the last spans are flushed.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if err := tr.Shutdown(flushCtx); err != nil {
			log.Warn("tracing: flush at exit failed", "error", err)
		}
	}()
	cfg.Instrument = func(h http.Handler) http.Handler { return tr.Handler(h, "provider") }
	cfg.WebhookTransport = tr.Transport(nil)

	running, err := provider.Start(ctx, addr, cfg)
	if err != nil {
		return err
	}
	log.Info("mock provider listening", "url", running.URL,
		"webhooks", cfg.WebhookURL != "", "chaos", cfg.Chaos != provider.Chaos{}, "tracing", tr.Enabled())

	<-ctx.Done()
	log.Info("shutting down")
	// ctx is already done; the shutdown gets a fresh deadline of its own.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	return running.Shutdown(shutdownCtx)
}

// serviceName is the provider's service.name in traces.
const serviceName = "payments-provider"

// loadConfig reads the environment. It reports every bad variable at once.
func loadConfig(getenv func(string) string) (string, provider.Config, tracing.Settings, error) {
	addr := getenv("HTTP_ADDR")
	if addr == "" {
		addr = ":8081"
	}
	cfg := provider.Config{
		WebhookURL:    getenv("WEBHOOK_URL"),
		WebhookSecret: getenv("WEBHOOK_SECRET"),
	}
	var errs []error
	if cfg.WebhookURL != "" {
		if u, err := url.Parse(cfg.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("WEBHOOK_URL %q: want an absolute http(s) URL", cfg.WebhookURL))
		}
	}
	if v := getenv("DUPLICATE_WEBHOOK_RATE"); v != "" {
		rate, err := parseRate("DUPLICATE_WEBHOOK_RATE", v)
		errs = append(errs, err)
		if rate == 0 {
			rate = -1 // in Config zero means "the default"; here the user said none
		}
		cfg.DuplicateWebhookRate = rate
	}
	var err error
	cfg.Chaos.LostResponseRate, err = parseRate("CHAOS_LOST_RESPONSE_RATE", getenv("CHAOS_LOST_RESPONSE_RATE"))
	errs = append(errs, err)
	cfg.Chaos.UnavailableRate, err = parseRate("CHAOS_UNAVAILABLE_RATE", getenv("CHAOS_UNAVAILABLE_RATE"))
	errs = append(errs, err)
	if v := getenv("CHAOS_LATENCY"); v != "" {
		cfg.Chaos.Latency, err = time.ParseDuration(v)
		if err != nil || cfg.Chaos.Latency < 0 {
			errs = append(errs, fmt.Errorf("CHAOS_LATENCY %q: want a duration such as 50ms", v))
		}
	}
	traces, err := tracing.FromEnv(getenv)
	errs = append(errs, err)
	return addr, cfg, traces, errors.Join(errs...)
}

// parseRate reads a share from 0 to 1; empty is 0.
func parseRate(name, v string) (float64, error) {
	if v == "" {
		return 0, nil
	}
	rate, err := strconv.ParseFloat(v, 64)
	if err != nil || rate < 0 || rate > 1 {
		return 0, fmt.Errorf("%s %q: want a number from 0 to 1", name, v)
	}
	return rate, nil
}
