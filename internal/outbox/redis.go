package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// StreamKey is the Redis stream the events go to.
const StreamKey = "outbox:events"

// Stream entry fields, as RedisStreamPublisher writes them.
const (
	FieldEventID    = "event_id"
	FieldType       = "type"
	FieldMerchantID = "merchant_id"
	FieldPayload    = "payload"
	// FieldTraceParent is the W3C trace context of the transaction that
	// wrote the event; absent when it was not traced.
	FieldTraceParent = "traceparent"
)

// DefaultUnreadMaxLen bounds the stream while no consumer group reads it:
// nothing is pending then, so keeping the newest million entries drops
// nothing that anyone is waiting for (the outbox table keeps every event
// for its own retention anyway).
const DefaultUnreadMaxLen = 1_000_000

// RedisStreamPublisher appends events to a Redis stream, one entry each,
// with the event id as a field for consumers to deduplicate on.
//
// XADD does not trim. Its MAXLEN (or MINID) option cuts by length or age
// alone and would drop an entry that a consumer read but has not yet
// acknowledged, which that consumer then never gets again: the entry is
// gone from the stream while its id stays in the group's pending list. So
// trimming is a step of its own, Trim, which the Dispatcher runs now and then
// (it is cheap, but several commands, and needs to run far less often than
// XADD): it asks every consumer group how far it got and trims below the
// lowest point any group still needs (see trimFloor).
type RedisStreamPublisher struct {
	Client redis.UniversalClient
	// UnreadMaxLen bounds the stream while it has no consumer group; zero
	// means DefaultUnreadMaxLen.
	UnreadMaxLen int64
}

// Publish implements Publisher.
func (p RedisStreamPublisher) Publish(ctx context.Context, events []Event) error {
	pipe := p.Client.Pipeline()
	for _, e := range events {
		values := map[string]any{FieldEventID: e.ID, FieldType: e.Type, FieldMerchantID: e.MerchantID, FieldPayload: e.Payload}
		if e.TraceParent != "" {
			values[FieldTraceParent] = e.TraceParent
		}
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: StreamKey, Values: values})
	}
	_, err := pipe.Exec(ctx)
	return err
}

// Trim implements Trimmer: it drops the entries that every consumer group
// has read and acknowledged, and never one that a group has not read yet or
// still holds pending. It returns how many entries it removed (Redis trims
// whole internal nodes only, so it may keep a few more than it could).
//
// Several instances may trim at once: each computes a floor from the
// groups' state at that moment, and that state only moves forward (entries
// are read in order and leave the pending list only when acknowledged), so
// a floor computed a moment ago is still safe. A group moved backwards by
// hand (XGROUP SETID) may find its entries gone; one that nobody reads any
// more holds the stream back until it is destroyed (XGROUP DESTROY).
func (p RedisStreamPublisher) Trim(ctx context.Context) (int64, error) {
	infos, err := p.Client.XInfoGroups(ctx, StreamKey).Result()
	if err != nil {
		if isNoStream(err) {
			return 0, nil // nothing published yet
		}
		return 0, fmt.Errorf("xinfo groups: %w", err)
	}
	groups := make([]groupState, 0, len(infos))
	for _, g := range infos {
		s := groupState{Name: g.Name, LastDelivered: g.LastDeliveredID}
		if g.Pending > 0 {
			pending, err := p.Client.XPending(ctx, StreamKey, g.Name).Result()
			if err != nil {
				return 0, fmt.Errorf("xpending %s: %w", g.Name, err)
			}
			s.OldestPending = pending.Lower
		}
		groups = append(groups, s)
	}
	floor, err := trimFloor(groups)
	if err != nil {
		return 0, err
	}
	// "~": Redis drops whole internal nodes only, far cheaper than an exact
	// trim, and never more than the exact one would.
	var n int64
	switch {
	case floor != "":
		n, err = p.Client.XTrimMinIDApprox(ctx, StreamKey, floor, 0).Result()
	case len(groups) == 0:
		maxLen := p.UnreadMaxLen
		if maxLen <= 0 {
			maxLen = DefaultUnreadMaxLen
		}
		n, err = p.Client.XTrimMaxLenApprox(ctx, StreamKey, maxLen, 0).Result()
	default:
		return 0, nil // some group has read nothing yet
	}
	if err != nil {
		return 0, fmt.Errorf("xtrim: %w", err)
	}
	return n, nil
}

// groupState is how far one consumer group got, as Trim reads it.
type groupState struct {
	Name string
	// LastDelivered is the newest id the group has handed to a consumer.
	LastDelivered string
	// OldestPending is the oldest id the group handed out and nobody has
	// acknowledged yet; empty when nothing is pending.
	OldestPending string
}

// trimFloor returns the id below which no consumer group needs any entry,
// for XTRIM MINID (which keeps the floor itself and everything after it),
// or "" when there is nothing to trim by that rule (no group, or a group
// that has read nothing).
//
// A group reads entries in id order, so of the entries up to LastDelivered
// each one is either acknowledged or pending; those after it are unread. It
// therefore needs everything from its oldest pending entry on, or, with
// nothing pending, everything after LastDelivered (LastDelivered itself is
// kept too: MINID keeps its argument, which costs one entry and spares an
// id's arithmetic). The floor is the lowest of these over all groups.
func trimFloor(groups []groupState) (string, error) {
	var floor streamID
	for i, g := range groups {
		need, err := parseStreamID(g.LastDelivered)
		if err != nil {
			return "", fmt.Errorf("group %s: last delivered id: %w", g.Name, err)
		}
		if g.OldestPending != "" {
			pending, err := parseStreamID(g.OldestPending)
			if err != nil {
				return "", fmt.Errorf("group %s: oldest pending id: %w", g.Name, err)
			}
			if pending.less(need) {
				need = pending
			}
		}
		if i == 0 || need.less(floor) {
			floor = need
		}
	}
	if len(groups) == 0 || floor == (streamID{}) {
		return "", nil
	}
	return floor.String(), nil
}

// streamID is a Redis stream entry id, <milliseconds>-<sequence>.
type streamID struct{ ms, seq uint64 }

func parseStreamID(s string) (streamID, error) {
	msText, seqText, ok := strings.Cut(s, "-")
	if !ok {
		return streamID{}, fmt.Errorf("stream id %q: want <ms>-<seq>", s)
	}
	ms, err1 := strconv.ParseUint(msText, 10, 64)
	seq, err2 := strconv.ParseUint(seqText, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return streamID{}, fmt.Errorf("stream id %q: want <ms>-<seq>: %w", s, err)
	}
	return streamID{ms, seq}, nil
}

func (a streamID) less(b streamID) bool {
	return a.ms < b.ms || (a.ms == b.ms && a.seq < b.seq)
}

func (a streamID) String() string {
	return strconv.FormatUint(a.ms, 10) + "-" + strconv.FormatUint(a.seq, 10)
}

// isNoStream: XINFO on a key that does not exist yet.
func isNoStream(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such key")
}
