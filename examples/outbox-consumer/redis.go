package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// runRedis consumes the outbox stream in consumer group cfg.group until ctx
// ends. Each round first takes over the entries that some consumer of the
// group (this one before a restart, or another that died) read and did not
// acknowledge for cfg.claimAfter, with XAUTOCLAIM, then reads new entries.
// Reading only new entries (">") would leave those forever pending.
func runRedis(ctx context.Context, cfg config, h *handler) error {
	opts, err := redis.ParseURL(cfg.redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	c := &redisConsumer{client: client, group: cfg.group, name: cfg.name, claimAfter: cfg.claimAfter, batch: int64(cfg.batch), h: h}
	for ctx.Err() == nil {
		if err := c.round(ctx); err != nil && ctx.Err() == nil {
			h.log.WarnContext(ctx, "redis round failed; retrying", "error", err)
			pause(ctx, time.Second)
		}
	}
	return nil
}

type redisConsumer struct {
	client     *redis.Client
	group      string
	name       string
	claimAfter time.Duration
	batch      int64
	h          *handler
	grouped    bool
}

// round reclaims stale entries, then reads and handles one batch of new
// ones, waiting up to a second for them.
func (c *redisConsumer) round(ctx context.Context) error {
	if !c.grouped {
		// From "0": a group made before the first event reads it too.
		err := c.client.XGroupCreateMkStream(ctx, redisStream, c.group, "0").Err()
		if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
			return fmt.Errorf("create group: %w", err)
		}
		c.grouped = true
	}
	if err := c.reclaim(ctx); err != nil {
		return err
	}
	streams, err := c.client.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: c.group, Consumer: c.name, Streams: []string{redisStream, ">"}, Count: c.batch, Block: time.Second,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		if redis.HasErrorPrefix(err, "NOGROUP") {
			c.grouped = false // the stream or group was deleted; make it again
		}
		return fmt.Errorf("xreadgroup: %w", err)
	}
	for _, s := range streams {
		if err := c.handleAll(ctx, s.Messages); err != nil {
			return err
		}
	}
	return nil
}

// reclaim takes over every entry pending for longer than claimAfter, a
// batch at a time, and handles it.
func (c *redisConsumer) reclaim(ctx context.Context) error {
	start := "0-0"
	for {
		msgs, next, err := c.client.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: redisStream, Group: c.group, Consumer: c.name, MinIdle: c.claimAfter, Start: start, Count: c.batch,
		}).Result()
		if err != nil {
			return fmt.Errorf("xautoclaim: %w", err)
		}
		if len(msgs) > 0 {
			c.h.log.InfoContext(ctx, "took over entries left unacknowledged", "entries", len(msgs))
		}
		if err := c.handleAll(ctx, msgs); err != nil {
			return err
		}
		if next == "0-0" || ctx.Err() != nil {
			return nil
		}
		start = next
	}
}

// handleAll handles entries in order. An event that can never apply
// (ErrBadEvent) stays pending and the others go on; any other failure (the
// database) ends the batch: the rest of it stays pending too, and comes
// back through reclaim once the round is tried again.
func (c *redisConsumer) handleAll(ctx context.Context, msgs []redis.XMessage) error {
	for _, m := range msgs {
		if ctx.Err() != nil {
			return nil
		}
		id := m.ID
		ack := func(ctx context.Context) error { return c.client.XAck(ctx, redisStream, c.group, id).Err() }
		e, ok := redisEvent(m)
		if !ok {
			// Not an entry our publisher writes; without an event id it
			// cannot be applied once, so it is dropped, loudly.
			c.h.log.ErrorContext(ctx, "stream entry without an event id; acknowledging without applying", "entry", m.ID)
			c.h.ackWithRetry(ctx, delivery{Event: Event{ID: m.ID}, ack: ack})
			continue
		}
		traceParent, _ := m.Values[fieldTraceParent].(string)
		if err := c.h.handle(ctx, delivery{Event: e, ack: ack, traceParent: traceParent}); err != nil && !errors.Is(err, ErrBadEvent) {
			return fmt.Errorf("entry %s stays pending and is claimed again: %w", m.ID, err)
		}
	}
	return nil
}

func redisEvent(m redis.XMessage) (Event, bool) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	e := Event{ID: str(fieldEventID), Type: str(fieldType), MerchantID: str(fieldMerchantID), Payload: []byte(str(fieldPayload))}
	return e, e.ID != "" && e.MerchantID != ""
}
