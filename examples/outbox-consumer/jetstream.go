package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runJetStream consumes the OUTBOX stream through the durable pull consumer
// cfg.group until ctx ends. The consumer lives in the server, so a restarted
// process (or another one with the same CONSUMER_GROUP) continues where the
// last one stopped; a message fetched and not acknowledged within its
// AckWait (CONSUMER_CLAIM_AFTER) is delivered again, to whichever process
// fetches next: JetStream's counterpart of XAUTOCLAIM.
func runJetStream(ctx context.Context, cfg config, h *handler) error {
	nc, err := nats.Connect(cfg.natsURL,
		nats.Name("outbox-consumer "+cfg.name),
		// Keep trying while the server is away; the durable consumer
		// keeps our place meanwhile.
		nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("NATS_URL: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	cons, err := durableConsumer(ctx, js, cfg, h)
	if err != nil || cons == nil {
		return err
	}
	for ctx.Err() == nil {
		if err := fetchAndHandle(ctx, cons, cfg.batch, h); err != nil && ctx.Err() == nil {
			h.log.WarnContext(ctx, "jetstream batch failed; retrying", "error", err)
			pause(ctx, time.Second)
		}
	}
	return nil
}

// durableConsumer creates or updates the durable consumer, waiting for the
// stream while the API has not created it yet. It returns nil, nil when ctx
// ends first.
func durableConsumer(ctx context.Context, js jetstream.JetStream, cfg config, h *handler) (jetstream.Consumer, error) {
	consCfg := jetstream.ConsumerConfig{
		Durable:       cfg.group,
		Description:   "examples/outbox-consumer: merchant_paid_totals",
		FilterSubject: natsSubjects,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.claimAfter,
		MaxDeliver:    -1, // a message is never given up on; see ErrBadEvent
	}
	waiting := false
	for {
		cons, err := js.CreateOrUpdateConsumer(ctx, natsStream, consCfg)
		if err == nil {
			return cons, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			if !waiting {
				h.log.InfoContext(ctx, "waiting for the API to create the stream", "stream", natsStream)
				waiting = true
			}
		} else {
			h.log.WarnContext(ctx, "creating the durable consumer failed; retrying", "error", err)
		}
		pause(ctx, time.Second)
	}
}

// fetchAndHandle fetches up to batch messages, waiting up to a second, and
// handles them in order. A database failure ends the batch: the messages
// not handled yet come back after AckWait.
func fetchAndHandle(ctx context.Context, cons jetstream.Consumer, batch int, h *handler) error {
	msgs, err := cons.Fetch(batch, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	for msg := range msgs.Messages() {
		if ctx.Err() != nil {
			return nil
		}
		ack := func(ctx context.Context) error { return msg.DoubleAck(ctx) }
		e, ok := jetStreamEvent(msg)
		if !ok {
			// Not a message our publisher writes; without an event id it
			// cannot be applied once. Term stops its redelivery.
			h.log.ErrorContext(ctx, "message without an event id; terminating it without applying", "subject", msg.Subject())
			h.ackWithRetry(ctx, delivery{ack: func(ctx context.Context) error { return msg.TermWithReason("no event id") }})
			continue
		}
		if err := h.handle(ctx, delivery{Event: e, ack: ack, traceParent: msg.Headers().Get(headerTraceParent)}); err != nil && !errors.Is(err, ErrBadEvent) {
			return fmt.Errorf("message %s is delivered again after AckWait: %w", e.ID, err)
		}
	}
	return msgs.Error()
}

func jetStreamEvent(msg jetstream.Msg) (Event, bool) {
	hd := msg.Headers()
	e := Event{ID: hd.Get(headerMsgID), Type: hd.Get(headerEventType), MerchantID: hd.Get(headerMerchantID), Payload: msg.Data()}
	return e, e.ID != "" && e.MerchantID != ""
}
