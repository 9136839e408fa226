package main

// The wire format of the API's outbox, as internal/outbox publishes it. A
// consumer lives in another repository in real life, so it carries its own
// copy; TestWireFormatMatchesThePublisher keeps the two equal.
const (
	// redisStream is the Redis stream (OUTBOX_SINK=redis); each entry has
	// the fields below.
	redisStream = "outbox:events"

	fieldEventID    = "event_id"
	fieldType       = "type"
	fieldMerchantID = "merchant_id"
	fieldPayload    = "payload"
	// fieldTraceParent is the W3C trace context of the transaction that
	// wrote the event; absent when the API did not trace it.
	fieldTraceParent = "traceparent"
)

// The JetStream side (OUTBOX_SINK=nats): the stream the API creates, the
// subjects it captures (outbox.events.<type>), and the headers of each
// message, whose data is the event's JSON payload. The event id is the
// message's Nats-Msg-Id, which the broker deduplicates on.
const (
	natsStream   = "OUTBOX"
	natsSubjects = "outbox.events.>"

	headerMsgID      = "Nats-Msg-Id"
	headerEventType  = "Outbox-Event-Type"
	headerMerchantID = "Outbox-Merchant-Id"
	// headerTraceParent is the W3C trace context header, as fieldTraceParent.
	headerTraceParent = "traceparent"
)
