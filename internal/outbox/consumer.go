package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Consumer reads the outbox stream in a consumer group and applies each
// event once, although the stream may hold it more than once: before
// applying, it claims the event id with SET NX, and an id already claimed is
// acknowledged and skipped. The example in examples/outbox-consumer runs it.
type Consumer struct {
	Client redis.UniversalClient
	Group  string
	Name   string
	// Apply handles one event. An error leaves the entry pending (and the
	// claim released) so it is delivered again.
	Apply func(ctx context.Context, e Event) error
	// SeenTTL is how long an event id is remembered; it must outlast the
	// window in which a duplicate can arrive. Zero means 7 days.
	SeenTTL time.Duration
}

// Poll reads and handles one batch, waiting up to block for entries, and
// returns how many events it applied and how many duplicates it skipped.
func (c *Consumer) Poll(ctx context.Context, block time.Duration) (applied, skipped int, err error) {
	err = c.Client.XGroupCreateMkStream(ctx, StreamKey, c.Group, "0").Err()
	if err != nil && !isBusyGroup(err) {
		return 0, 0, err
	}
	streams, err := c.Client.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: c.Group, Consumer: c.Name, Streams: []string{StreamKey, ">"}, Count: 100, Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	ttl := c.SeenTTL
	if ttl <= 0 {
		ttl = 7 * 24 * time.Hour
	}
	for _, s := range streams {
		for _, m := range s.Messages {
			e := Event{ID: str(m.Values["event_id"]), Type: str(m.Values["type"]), MerchantID: str(m.Values["merchant_id"]), Payload: str(m.Values["payload"])}
			seenKey := "outbox:seen:{" + c.Group + "}:" + e.ID
			first, err := c.Client.SetNX(ctx, seenKey, 1, ttl).Result()
			if err != nil {
				return applied, skipped, err
			}
			if !first {
				skipped++
				c.Client.XAck(ctx, StreamKey, c.Group, m.ID)
				continue
			}
			if err := c.Apply(ctx, e); err != nil {
				c.Client.Del(ctx, seenKey)
				return applied, skipped, err
			}
			applied++
			c.Client.XAck(ctx, StreamKey, c.Group, m.ID)
		}
	}
	return applied, skipped, nil
}

// isBusyGroup: the group exists already, which is the usual case.
func isBusyGroup(err error) bool { return redis.HasErrorPrefix(err, "BUSYGROUP") }

func str(v any) string {
	s, _ := v.(string)
	return s
}
