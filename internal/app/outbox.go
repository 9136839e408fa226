package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/outbox"
)

// outboxSink is where the dispatcher publishes, as OUTBOX_SINK chose it.
type outboxSink struct {
	publisher outbox.Publisher
	name      string          // handlers.OutboxRedis, OutboxNATS or OutboxLog, for /readyz
	nats      handlers.Pinger // nil unless name is OutboxNATS
}

// newOutboxSink picks the dispatcher's publisher: JetStream with
// OUTBOX_SINK=nats; otherwise the Redis stream, or the log when Redis is off
// (redisClient nil). Like Redis, NATS being down at start is no reason to
// refuse to start: the events wait in outbox_events, the client reconnects
// for ever, and the stream is created by the first publish that reaches the
// server.
func (a *App) newOutboxSink(ctx context.Context, redisClient redis.UniversalClient) (outboxSink, error) {
	log := a.log.With("component", "outbox")
	switch {
	case a.cfg.OutboxSink == config.OutboxSinkNATS:
		nc, err := nats.Connect(a.cfg.NATSURL, nats.Name("payments-api"),
			nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second))
		if err != nil {
			return outboxSink{}, fmt.Errorf("NATS_URL: %w", err)
		}
		a.closers = append(a.closers, func() error { nc.Close(); return nil })
		pub, err := outbox.NewJetStreamPublisher(nc)
		if err != nil {
			return outboxSink{}, err
		}
		ensureCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := pub.EnsureStream(ensureCtx); err != nil {
			log.WarnContext(ctx, "outbox: NATS not reachable at start; events wait in the database until it is", "error", err)
		} else {
			log.InfoContext(ctx, "outbox: publishing to JetStream", "stream", outbox.JetStreamStream,
				"subjects", outbox.JetStreamSubjectPrefix+">", "duplicate_window", outbox.JetStreamDuplicateWindow.String())
		}
		ping := handlers.PingerFunc(func(ctx context.Context) error {
			if !nc.IsConnected() {
				return errors.New("nats: " + nc.Status().String())
			}
			return nc.FlushWithContext(ctx)
		})
		return outboxSink{publisher: pub, name: handlers.OutboxNATS, nats: ping}, nil
	case redisClient != nil:
		return outboxSink{publisher: outbox.RedisStreamPublisher{Client: redisClient}, name: handlers.OutboxRedis}, nil
	default:
		return outboxSink{publisher: outbox.LogPublisher{Log: log}, name: handlers.OutboxLog}, nil
	}
}
