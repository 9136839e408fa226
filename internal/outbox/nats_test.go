package outbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// streamMessages reads every message of the OUTBOX stream, in order.
func streamMessages(t *testing.T, js jetstream.JetStream) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, JetStreamStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var msgs []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		require.NoError(t, err)
		msgs = append(msgs, m)
	}
	require.Len(t, msgs, int(info.State.Msgs))
	return msgs
}

func jsEvents(n int) []Event {
	events := make([]Event, n)
	for i := range events {
		typ := []string{"order.created", "payment.succeeded"}[i%2]
		events[i] = Event{ID: fmt.Sprintf("evt_%02d", i), MerchantID: fmt.Sprintf("mer_%d", i%3), Type: typ, Payload: fmt.Sprintf(`{"n": %d}`, i)}
	}
	return events
}

// TestJetStreamPublisherDropsRepublishes: the same batch twice is stored
// once, each message on its type's subject with the event in its headers.
func TestJetStreamPublisherDropsRepublishes(t *testing.T) {
	ctx := context.Background()
	ns := testkit.StartNATS(t)
	p, err := NewJetStreamPublisher(ns.Conn(t))
	require.NoError(t, err)
	events := jsEvents(10)
	require.NoError(t, p.Publish(ctx, events))
	require.NoError(t, p.Publish(ctx, events))
	require.NoError(t, p.Publish(ctx, events[3:5]))

	js := ns.JetStream(t)
	msgs := streamMessages(t, js)
	require.Len(t, msgs, len(events))
	for i, m := range msgs {
		e := events[i]
		require.Equal(t, "outbox.events."+e.Type, m.Subject)
		require.Equal(t, e.ID, m.Header.Get(jetstream.MsgIDHeader))
		require.Equal(t, e.Type, m.Header.Get(HeaderEventType))
		require.Equal(t, e.MerchantID, m.Header.Get(HeaderMerchantID))
		require.Equal(t, e.Payload, string(m.Data))
	}

	s, err := js.Stream(ctx, JetStreamStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, JetStreamDuplicateWindow, info.Config.Duplicates)
	require.Equal(t, []string{"outbox.events.>"}, info.Config.Subjects)

	err = p.Publish(ctx, []Event{{ID: "evt_x", Type: "bad type", MerchantID: "m", Payload: "{}"}})
	require.ErrorContains(t, err, "cannot be a subject token")
}

// TestJetStreamEnsureStreamUpdatesAnOldOne: a stream made by hand (or by an
// older version) with another duplicate window is brought to ours.
func TestJetStreamEnsureStreamUpdatesAnOldOne(t *testing.T) {
	ctx := context.Background()
	ns := testkit.StartNATS(t)
	js := ns.JetStream(t)
	old := JetStreamConfig()
	old.Duplicates = 30 * time.Second
	_, err := js.CreateStream(ctx, old)
	require.NoError(t, err)

	p, err := NewJetStreamPublisher(ns.Conn(t))
	require.NoError(t, err)
	require.NoError(t, p.EnsureStream(ctx))
	s, err := js.Stream(ctx, JetStreamStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, JetStreamDuplicateWindow, info.Config.Duplicates)
}

// diesAfterPublish publishes, then fails as a dispatcher that died before
// marking the rows published would: the transaction never commits.
type diesAfterPublish struct{ Publisher }

func (d diesAfterPublish) Publish(ctx context.Context, events []Event) error {
	if err := d.Publisher.Publish(ctx, events); err != nil {
		return err
	}
	return errors.New("died between publish and mark")
}

func insertEvents(t *testing.T, db *database.DB, events []Event) {
	t.Helper()
	now := time.Now().UTC()
	for i, e := range events {
		require.NoError(t, db.Exec("INSERT INTO outbox_events (merchant_id, id, type, payload, created_at) VALUES (?, ?, ?, ?, ?)",
			e.MerchantID, e.ID, e.Type, e.Payload, now.Add(time.Duration(i)*time.Millisecond)).Error)
	}
}

func unpublished(t *testing.T, db *database.DB) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw("SELECT count(*) FROM outbox_events WHERE published_at IS NULL").Scan(&n).Error)
	return n
}

// TestDispatcherPublishesTwiceTheBrokerKeepsOnce: the dispatcher publishes
// a batch and dies before marking it (its transaction rolls back), then
// runs again and publishes the same events: JetStream holds each once, and
// the outbox rows end up published.
func TestDispatcherPublishesTwiceTheBrokerKeepsOnce(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			db := testkit.OpenDB(t, dialect)
			ns := testkit.StartNATS(t)
			pub, err := NewJetStreamPublisher(ns.Conn(t))
			require.NoError(t, err)
			events := jsEvents(7)
			insertEvents(t, db, events)

			_, err = NewDispatcher(db.DB, diesAfterPublish{pub}, time.Second, nil).DispatchOnce(ctx)
			require.ErrorContains(t, err, "died between publish and mark")
			require.EqualValues(t, len(events), unpublished(t, db), "nothing marked")
			require.Len(t, streamMessages(t, ns.JetStream(t)), len(events), "but all published")

			n, err := NewDispatcher(db.DB, pub, time.Second, nil).DispatchOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, len(events), n, "published again")
			require.Zero(t, unpublished(t, db))

			msgs := streamMessages(t, ns.JetStream(t))
			require.Len(t, msgs, len(events), "the broker dropped the second copies")
			seen := map[string]int{}
			for _, m := range msgs {
				seen[m.Header.Get(jetstream.MsgIDHeader)]++
			}
			for _, e := range events {
				require.Equal(t, 1, seen[e.ID], e.ID)
			}
		})
	}
}

// TestJetStreamPublisherAcrossAnOutage: with the server gone a batch fails
// (the dispatcher keeps the rows), and once it is back the same connection
// publishes again, into the stream the server kept on disk.
func TestJetStreamPublisherAcrossAnOutage(t *testing.T) {
	ctx := context.Background()
	ns := testkit.StartNATS(t)
	p, err := NewJetStreamPublisher(ns.Conn(t))
	require.NoError(t, err)
	events := jsEvents(4)
	require.NoError(t, p.Publish(ctx, events[:2]))

	ns.Kill()
	require.Error(t, p.Publish(ctx, events[2:]))

	require.NoError(t, ns.Restart(30*time.Second))
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := p.Publish(ctx, events)
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "no publish within 30s of the restart: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
	msgs := streamMessages(t, ns.JetStream(t))
	require.Len(t, msgs, len(events), "the first two were dropped as duplicates, the others stored once")
}
