package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream side of the outbox (OUTBOX_SINK=nats).
//
// Every event is one message on the subject outbox.events.<type> (for
// example outbox.events.payment.succeeded) in the stream OUTBOX, which
// captures outbox.events.>. The message's data is the event's JSON payload;
// its headers carry the rest:
//
//	Nats-Msg-Id          the event id: the broker's deduplication key
//	Outbox-Event-Type    the event type (also the subject's tail)
//	Outbox-Merchant-Id   the merchant
//	traceparent          the W3C trace context of the transaction that
//	                     wrote the event (absent when it was not traced)
//
// The stream drops a message whose Nats-Msg-Id it has seen within its
// duplicate window, JetStreamDuplicateWindow: the re-publish that follows a
// dispatcher crash between publishing and marking published is then stored
// once. A re-publish later than that (the API down for longer) is stored
// twice, and the consumer's own record of processed ids catches it, as it
// must for Redis: the window narrows duplicates, it does not end them.
const (
	JetStreamStream        = "OUTBOX"
	JetStreamSubjectPrefix = "outbox.events."

	HeaderEventType  = "Outbox-Event-Type"
	HeaderMerchantID = "Outbox-Merchant-Id"
	// HeaderTraceParent is the W3C trace context header.
	HeaderTraceParent = "traceparent"

	// JetStreamDuplicateWindow is ten minutes: long enough for an API
	// instance that died mid-batch to be restarted (DB_CONNECT_TIMEOUT,
	// an orchestrator's back-off) or for another instance to take the
	// rows over once PostgreSQL drops the dead one's locks, and short
	// enough that the ids the server keeps in memory stay small (an id is
	// some thirty bytes: 600 s at a thousand events a second is a few tens
	// of megabytes). The server's own default is two minutes.
	JetStreamDuplicateWindow = 10 * time.Minute

	// JetStreamMaxAge is how long the stream keeps a message, acknowledged
	// or not: a week, like the outbox table's published rows. A consumer
	// that stays away longer misses messages; the stream has no length
	// limit that could drop a newer one earlier.
	JetStreamMaxAge = 7 * 24 * time.Hour
)

// JetStreamSubject is the subject an event of this type is published on.
func JetStreamSubject(eventType string) string { return JetStreamSubjectPrefix + eventType }

// JetStreamConfig is the stream the publisher creates, or updates to this,
// at start.
func JetStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        JetStreamStream,
		Description: "Outbox events of the payments API; Nats-Msg-Id is the event id",
		Subjects:    []string{JetStreamSubjectPrefix + ">"},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      JetStreamMaxAge,
		Storage:     jetstream.FileStorage,
		Duplicates:  JetStreamDuplicateWindow,
	}
}

// JetStreamPublisher publishes events to the OUTBOX stream.
type JetStreamPublisher struct {
	js jetstream.JetStream

	mu     sync.Mutex
	stream bool // the stream is known to exist with our configuration
}

// publishTimeout bounds the wait for the server's acknowledgement of one
// message. The Dispatcher holds its rows locked meanwhile, so a server that
// went away must fail the batch rather than hang it.
const publishTimeout = 5 * time.Second

// NewJetStreamPublisher returns a publisher over nc. It does not talk to the
// server: EnsureStream does, and Publish calls it until it has worked once.
func NewJetStreamPublisher(nc *nats.Conn) (*JetStreamPublisher, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(publishTimeout))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &JetStreamPublisher{js: js}, nil
}

// EnsureStream creates the OUTBOX stream, or updates an existing one to
// JetStreamConfig. The API calls it at start; when NATS is not reachable
// then, the first Publish that reaches it does the same.
func (p *JetStreamPublisher) EnsureStream(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stream {
		return nil
	}
	if _, err := p.js.CreateOrUpdateStream(ctx, JetStreamConfig()); err != nil {
		return fmt.Errorf("create or update stream %s: %w", JetStreamStream, err)
	}
	p.stream = true
	return nil
}

// Publish implements Publisher. It sends the whole batch asynchronously,
// then waits for the server's acknowledgement of every message: an error
// for any of them fails the batch, which the Dispatcher sends again whole,
// and the messages that had made it are dropped as duplicates.
func (p *JetStreamPublisher) Publish(ctx context.Context, events []Event) error {
	if err := p.EnsureStream(ctx); err != nil {
		return err
	}
	futures := make([]jetstream.PubAckFuture, 0, len(events))
	for _, e := range events {
		if e.Type == "" || strings.ContainsAny(e.Type, " \t\r\n*>") {
			return fmt.Errorf("event %s: type %q cannot be a subject token", e.ID, e.Type)
		}
		msg := nats.NewMsg(JetStreamSubject(e.Type))
		msg.Data = []byte(e.Payload)
		msg.Header.Set(HeaderEventType, e.Type)
		msg.Header.Set(HeaderMerchantID, e.MerchantID)
		if e.TraceParent != "" {
			msg.Header.Set(HeaderTraceParent, e.TraceParent)
		}
		f, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(e.ID), jetstream.WithExpectStream(JetStreamStream))
		if err != nil {
			return fmt.Errorf("publish %s: %w", e.ID, err)
		}
		futures = append(futures, f)
	}
	var errs []error
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs = append(errs, fmt.Errorf("publish %s: %w", events[i].ID, err))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := errors.Join(errs...); err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) {
			// Deleted under us: make it again on the next try.
			p.mu.Lock()
			p.stream = false
			p.mu.Unlock()
		}
		return err
	}
	return nil
}
