// Command outbox-consumer is an example consumer of the API's outbox events.
// It shows the other half of at-least-once delivery: the dispatcher may
// publish an event twice, the broker may deliver it twice, and this consumer
// may die at any instruction, yet each event's effect is applied exactly
// once.
//
// The effect is a running total of paid amounts per merchant and currency,
// from payment.succeeded events, in the consumer's own database. Three rules
// make it exactly once:
//
//  1. The event id is recorded in the same transaction as the effect, in a
//     table beside it (processed_events), and inserted first: an id that is
//     there already means "applied before", and nothing is committed.
//  2. The message is acknowledged only after that commit, and an ack that
//     fails is retried. A crash between commit and ack delivers the message
//     again, and rule 1 drops it.
//  3. A message read but never acknowledged (a crash before or during the
//     apply, a database error) is delivered again after CONSUMER_CLAIM_AFTER:
//     Redis hands it over with XAUTOCLAIM, JetStream redelivers it after the
//     consumer's AckWait.
//
// It imports nothing from the API's internal packages: the wire format
// (stream names, fields, headers) is written out in wire.go.
//
//	OUTBOX_SINK=redis REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/outbox-consumer
//
// Environment (defaults in brackets):
//
//	OUTBOX_SINK            redis or nats, as the API's [redis]
//	REDIS_URL              [redis://127.0.0.1:6379/0]
//	NATS_URL               [nats://127.0.0.1:4222]
//	CONSUMER_DATABASE_URL  postgres://… or sqlite:<path> [sqlite:outbox-consumer.db]
//	CONSUMER_GROUP         Redis consumer group, or JetStream durable consumer [outbox-consumer]
//	CONSUMER_NAME          this process within the group (Redis) [host-pid]
//	CONSUMER_CLAIM_AFTER   redeliver what was not acknowledged after this long [30s]
//	CONSUMER_BATCH         messages read at once [100]
//	LOG_LEVEL              debug, info, warn or error [info]
//	OTEL_EXPORTER_OTLP_ENDPOINT  trace each event in the trace of the request
//	                       that caused it, over OTLP/HTTP (tracing.go) [empty: off]
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "outbox-consumer:", err)
		os.Exit(1)
	}
}

// config is the consumer's environment.
type config struct {
	sink        string
	redisURL    string
	natsURL     string
	databaseURL string
	group       string
	name        string
	claimAfter  time.Duration
	batch       int
	logLevel    slog.Level
	crash       *crasher
}

func loadConfig(getenv func(string) string) (config, error) {
	get := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	host, _ := os.Hostname()
	c := config{
		sink:        get("OUTBOX_SINK", "redis"),
		redisURL:    get("REDIS_URL", "redis://127.0.0.1:6379/0"),
		natsURL:     get("NATS_URL", "nats://127.0.0.1:4222"),
		databaseURL: get("CONSUMER_DATABASE_URL", "sqlite:outbox-consumer.db"),
		group:       get("CONSUMER_GROUP", "outbox-consumer"),
		name:        get("CONSUMER_NAME", fmt.Sprintf("%s-%d", host, os.Getpid())),
	}
	var errs []error
	if c.sink != "redis" && c.sink != "nats" {
		errs = append(errs, fmt.Errorf("OUTBOX_SINK must be redis or nats, got %q", c.sink))
	}
	// A JetStream durable name may not hold these; a Redis group could, but
	// one rule for both keeps a group name portable.
	if c.group == "" || strings.ContainsAny(c.group, " \t\r\n.*>/\\") {
		errs = append(errs, fmt.Errorf("CONSUMER_GROUP must be a name without spaces, dots, *, > or slashes, got %q", c.group))
	}
	var err error
	if c.claimAfter, err = time.ParseDuration(get("CONSUMER_CLAIM_AFTER", "30s")); err != nil || c.claimAfter <= 0 {
		errs = append(errs, fmt.Errorf("CONSUMER_CLAIM_AFTER must be a positive duration such as 30s, got %q", getenv("CONSUMER_CLAIM_AFTER")))
	}
	if c.batch, err = strconv.Atoi(get("CONSUMER_BATCH", "100")); err != nil || c.batch < 1 || c.batch > 10_000 {
		errs = append(errs, fmt.Errorf("CONSUMER_BATCH must be an integer from 1 to 10000, got %q", getenv("CONSUMER_BATCH")))
	}
	if err := c.logLevel.UnmarshalText([]byte(get("LOG_LEVEL", "info"))); err != nil {
		errs = append(errs, fmt.Errorf("LOG_LEVEL must be debug, info, warn or error, got %q", getenv("LOG_LEVEL")))
	}
	if c.crash, err = newCrasher(getenv("CONSUMER_CRASH_AT"), getenv("CONSUMER_CRASH_AFTER")); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

func run(ctx context.Context, getenv func(string) string) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	store, err := OpenStore(ctx, cfg.databaseURL)
	if err != nil {
		return err
	}
	defer store.Close()
	tracer, flush, err := startTracing(ctx, getenv)
	if err != nil {
		return err
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = flush(flushCtx)
	}()
	h := &handler{store: store, log: log, crash: cfg.crash, tracer: tracer}
	log.Info("outbox consumer started", "sink", cfg.sink, "group", cfg.group, "name", cfg.name, "claim_after", cfg.claimAfter)
	switch cfg.sink {
	case "redis":
		return runRedis(ctx, cfg, h)
	default:
		return runJetStream(ctx, cfg, h)
	}
}

// delivery is one message from a broker: the event and how to acknowledge it.
type delivery struct {
	Event
	// ack tells the broker the message is done with; it returns once the
	// broker has it (or failed to).
	ack func(ctx context.Context) error
	// traceParent is the trace context the event came with, "" if none.
	traceParent string
}

// handler applies deliveries one at a time, whichever broker they come from.
type handler struct {
	store  *Store
	log    *slog.Logger
	crash  *crasher
	tracer trace.Tracer
}

// handle applies d and acknowledges it. It returns an error when the event
// was not applied; the message then stays unacknowledged and comes back
// after CONSUMER_CLAIM_AFTER.
func (h *handler) handle(ctx context.Context, d delivery) (err error) {
	ctx, end := startSpan(ctx, h.tracer, d)
	defer func() { end(err) }()
	h.crash.crashAt(crashBeforeApply, d.ID)
	applied, err := h.store.Apply(ctx, d.Event)
	if err != nil {
		if errors.Is(err, ErrBadEvent) {
			h.log.ErrorContext(ctx, "event cannot be applied; left unacknowledged", "event_id", d.ID, "error", err)
		}
		return err
	}
	if applied {
		h.crash.crashAt(crashAfterCommit, d.ID)
		h.log.DebugContext(ctx, "applied", "event_id", d.ID, "type", d.Type, "merchant_id", d.MerchantID)
	} else {
		h.log.InfoContext(ctx, "duplicate: applied before; acknowledging", "event_id", d.ID)
	}
	h.ackWithRetry(ctx, d)
	return nil
}

// ackWithRetry retries a failed acknowledgement a few times. If the broker
// stays unreachable the message is simply delivered again later, and Apply
// recognises it; the retries only spare that round trip.
func (h *handler) ackWithRetry(ctx context.Context, d delivery) {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ackCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := d.ack(ackCtx)
		cancel()
		if err == nil {
			return
		}
		if attempt == 5 || ctx.Err() != nil {
			h.log.WarnContext(ctx, "ack failed; the message will be delivered again and recognised", "event_id", d.ID, "attempts", attempt, "error", err)
			return
		}
		h.log.DebugContext(ctx, "ack failed; retrying", "event_id", d.ID, "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// pause waits d or until ctx ends, after an error that a retry may fix.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
