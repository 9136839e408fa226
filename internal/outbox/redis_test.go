package outbox

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/testkit"
)

func TestTrimFloor(t *testing.T) {
	tests := []struct {
		name    string
		groups  []groupState
		want    string
		wantErr bool
	}{
		{name: "no group", groups: nil, want: ""},
		{name: "a group that read nothing", groups: []groupState{{Name: "a", LastDelivered: "0-0"}}, want: ""},
		{name: "all acknowledged: keep from the last delivered", groups: []groupState{{Name: "a", LastDelivered: "100-3"}}, want: "100-3"},
		{name: "pending: keep from the oldest pending", groups: []groupState{{Name: "a", LastDelivered: "100-3", OldestPending: "90-0"}}, want: "90-0"},
		{name: "the slowest group wins", groups: []groupState{
			{Name: "fast", LastDelivered: "200-0"},
			{Name: "slow", LastDelivered: "150-0", OldestPending: "120-7"},
			{Name: "mid", LastDelivered: "180-0", OldestPending: "130-0"},
		}, want: "120-7"},
		{name: "one group not started holds everything", groups: []groupState{
			{Name: "fast", LastDelivered: "200-0"},
			{Name: "new", LastDelivered: "0-0"},
		}, want: ""},
		{name: "sequence compared as a number", groups: []groupState{
			{Name: "a", LastDelivered: "100-10"},
			{Name: "b", LastDelivered: "100-9"},
		}, want: "100-9"},
		{name: "milliseconds compared as a number", groups: []groupState{
			{Name: "a", LastDelivered: "99-0"},
			{Name: "b", LastDelivered: "100-0"},
		}, want: "99-0"},
		{name: "malformed last delivered", groups: []groupState{{Name: "a", LastDelivered: "100"}}, wantErr: true},
		{name: "malformed pending", groups: []groupState{{Name: "a", LastDelivered: "1-0", OldestPending: "x-1"}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := trimFloor(tt.groups)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// newTrimRedis is a private redis-server whose stream nodes hold two entries
// each, so that the approximate trim ("~", whole nodes only) trims a short
// stream of a test nearly as precisely as an exact one would.
func newTrimRedis(t *testing.T) *redis.Client {
	t.Helper()
	c := testkit.StartRedis(t).Client(t)
	require.NoError(t, c.ConfigSet(context.Background(), "stream-node-max-entries", "2").Err())
	return c
}

func publishN(t *testing.T, p RedisStreamPublisher, n int) []string {
	t.Helper()
	ctx := context.Background()
	events := make([]Event, n)
	for i := range events {
		events[i] = Event{ID: fmt.Sprintf("evt_%02d", i), MerchantID: "mer_1", Type: "order.created", Payload: "{}"}
	}
	require.NoError(t, p.Publish(ctx, events))
	entries, err := p.Client.XRange(ctx, StreamKey, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, entries, n)
	ids := make([]string, n)
	for i, e := range entries {
		require.Equal(t, events[i].ID, e.Values[FieldEventID])
		ids[i] = e.ID
	}
	return ids
}

func readGroup(t *testing.T, c *redis.Client, group string, n int64) []redis.XMessage {
	t.Helper()
	ctx := context.Background()
	streams, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "c", Streams: []string{StreamKey, ">"}, Count: n, Block: -1}).Result()
	require.NoError(t, err)
	return streams[0].Messages
}

func streamIDs(t *testing.T, c *redis.Client) []string {
	t.Helper()
	entries, err := c.XRange(context.Background(), StreamKey, "-", "+").Result()
	require.NoError(t, err)
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	return ids
}

// TestRedisTrimKeepsWhatAGroupStillNeeds: two groups at different points,
// one with an old entry pending; the trim drops only what both have
// acknowledged, and the pending entry can still be claimed afterwards.
func TestRedisTrimKeepsWhatAGroupStillNeeds(t *testing.T) {
	ctx := context.Background()
	c := newTrimRedis(t)
	p := RedisStreamPublisher{Client: c}

	n, err := p.Trim(ctx)
	require.NoError(t, err, "no stream yet")
	require.Zero(t, n)

	ids := publishN(t, p, 20)
	for _, g := range []string{"slow", "fast"} {
		require.NoError(t, c.XGroupCreate(ctx, StreamKey, g, "0").Err())
	}
	// slow: read 12, acknowledged all but the 7th (index 6).
	slow := readGroup(t, c, "slow", 12)
	for i, m := range slow {
		if i != 6 {
			require.NoError(t, c.XAck(ctx, StreamKey, "slow", m.ID).Err())
		}
	}
	// fast: read and acknowledged 18.
	for _, m := range readGroup(t, c, "fast", 18) {
		require.NoError(t, c.XAck(ctx, StreamKey, "fast", m.ID).Err())
	}

	n, err = p.Trim(ctx)
	require.NoError(t, err)
	left := streamIDs(t, c)
	require.Equal(t, int64(len(ids)-len(left)), n)
	require.Positive(t, n, "entries both groups acknowledged are trimmed")
	require.LessOrEqual(t, n, int64(6), "nothing from the oldest pending entry on")
	require.Equal(t, ids[len(ids)-len(left):], left, "only a prefix goes")
	require.Contains(t, left, ids[6], "the pending entry stays")

	// The pending entry is whole: a consumer that claims it gets its fields.
	claimed, _, err := c.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: StreamKey, Group: "slow", Consumer: "other", Start: "0-0", Count: 10}).Result()
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, ids[6], claimed[0].ID)
	require.Equal(t, "evt_06", claimed[0].Values[FieldEventID])

	// Once it is acknowledged, the trim moves up to slow's last delivered
	// entry; fast's unread two and slow's unread eight stay.
	require.NoError(t, c.XAck(ctx, StreamKey, "slow", ids[6]).Err())
	_, err = p.Trim(ctx)
	require.NoError(t, err)
	left = streamIDs(t, c)
	require.Contains(t, left, ids[11], "slow's last delivered entry is kept (MINID keeps its argument)")
	require.Equal(t, ids[len(ids)-len(left):], left)
	require.GreaterOrEqual(t, len(left), 9)
}

// TestRedisTrimWaitsForAGroupThatReadNothing: a group created but not yet
// reading holds the whole stream.
func TestRedisTrimWaitsForAGroupThatReadNothing(t *testing.T) {
	ctx := context.Background()
	c := newTrimRedis(t)
	p := RedisStreamPublisher{Client: c}
	ids := publishN(t, p, 10)
	require.NoError(t, c.XGroupCreate(ctx, StreamKey, "fast", "0").Err())
	require.NoError(t, c.XGroupCreate(ctx, StreamKey, "idle", "0").Err())
	for _, m := range readGroup(t, c, "fast", 10) {
		require.NoError(t, c.XAck(ctx, StreamKey, "fast", m.ID).Err())
	}
	n, err := p.Trim(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, ids, streamIDs(t, c))
}

// TestRedisTrimWithoutGroupsKeepsTheNewest: nobody reads the stream, so
// nothing is pending and it is bounded by length alone.
func TestRedisTrimWithoutGroupsKeepsTheNewest(t *testing.T) {
	ctx := context.Background()
	c := newTrimRedis(t)
	p := RedisStreamPublisher{Client: c, UnreadMaxLen: 4}
	ids := publishN(t, p, 12)
	_, err := p.Trim(ctx)
	require.NoError(t, err)
	left := streamIDs(t, c)
	require.GreaterOrEqual(t, len(left), 4)
	require.Less(t, len(left), 12)
	require.Equal(t, ids[len(ids)-len(left):], left, "the newest stay")
}
