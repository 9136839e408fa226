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
)
