package gormstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/gormstore/gormtest"
	"github.com/idemkeys/payments/internal/testkit"
)

// The skeleton of outside calls (idempotency.Effect) on a real store, both
// dialects: a "send" resource whose outside effect is a transfer at a fake
// bank that deduplicates by key, as a payment provider does. Each test
// counts the bank's transfers, the rows and the records, not only answers.

const sendsTable = `CREATE TABLE sends (scope TEXT NOT NULL, id TEXT NOT NULL, amount INTEGER NOT NULL,
	status TEXT NOT NULL, PRIMARY KEY (scope, id))`

type send struct {
	Scope, ID string
	Amount    int64
	Status    string // pending, unknown, sent, refused, canceled
}

type transfer struct {
	Key    string
	Amount int64
	OK     bool
}

// bank is the outside service: it executes a transfer once per key, and can
// be told how to answer the next calls.
type bank struct {
	mu        sync.Mutex
	transfers map[string]transfer
	sends     int
	// next answers the next calls, in order: "ok" (execute and answer),
	// "down" (nothing executed: 503), "lost" (execute, lose the answer),
	// "hold" (wait on held first, then as "ok").
	next []string
	held chan struct{}
}

func (b *bank) pop() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sends++
	if len(b.next) == 0 {
		return "ok"
	}
	a := b.next[0]
	b.next = b.next[1:]
	return a
}

func (b *bank) send(key string, amount int64) (transfer, error) {
	switch b.pop() {
	case "down":
		return transfer{}, fmt.Errorf("bank: 503: %w", idempotency.ErrNotExecuted)
	case "lost":
		b.execute(key, amount)
		return transfer{}, errors.New("bank: timeout")
	case "hold":
		<-b.held
	}
	return b.execute(key, amount), nil
}

func (b *bank) execute(key string, amount int64) transfer {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := b.transfers[key]; ok {
		return t
	}
	t := transfer{Key: key, Amount: amount, OK: true}
	b.transfers[key] = t
	return t
}

func (b *bank) find(key string) (transfer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.transfers[key]
	if !ok {
		return transfer{}, idempotency.ErrNoSuchCall
	}
	return t, nil
}

func (b *bank) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.transfers)
}

// sendEnv is a Keeper with the send Effect registered, over a fresh
// database of the dialect.
type sendEnv struct {
	db     *gorm.DB
	store  *gormstore.Store
	clock  *fakeClock
	keeper *idempotency.Keeper
	bank   *bank
	sends  *idempotency.Effect[send, transfer]
	cfg    idempotency.Config
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newSendEnv(t *testing.T, dialect string) *sendEnv {
	t.Helper()
	e := &sendEnv{db: gormtest.Open(t, dialect, sendsTable), clock: &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		bank: &bank{transfers: map[string]transfer{}, held: make(chan struct{})}}
	e.store = gormstore.New(e.db)
	e.cfg = idempotency.Config{Transactor: e.store, Now: e.clock.Now, LockTimeout: 30 * time.Second, CancelAfter: time.Hour, Wait: 50 * time.Millisecond}
	e.keeper, e.sends = e.newKeeper(t)
	return e
}

// newKeeper is another instance over the same database and bank.
func (e *sendEnv) newKeeper(t *testing.T) (*idempotency.Keeper, *idempotency.Effect[send, transfer]) {
	k := idempotency.New(e.store, e.cfg)
	conn := func(ctx context.Context) *gorm.DB { return dbtx.Conn(ctx, e.db) }
	load := func(ctx context.Context, scope, id string) (send, error) {
		var s send
		err := conn(ctx).Raw(`SELECT scope, id, amount, status FROM sends WHERE scope = ? AND id = ?`, scope, id).
			Row().Scan(&s.Scope, &s.ID, &s.Amount, &s.Status)
		return s, err
	}
	set := func(ctx context.Context, s send, status string) (send, error) {
		s.Status = status
		return s, conn(ctx).Exec(`UPDATE sends SET status = ? WHERE scope = ? AND id = ?`, status, s.Scope, s.ID).Error
	}
	eff := idempotency.Register(k, idempotency.Effect[send, transfer]{
		Kind: "send", Prefix: "snd_",
		Load: load,
		Send: func(_ context.Context, s send, key string) (transfer, error) { return e.bank.send(key, s.Amount) },
		Find: func(_ context.Context, _ send, key string) (transfer, error) { return e.bank.find(key) },
		Check: func(s send, t transfer) error {
			if t.Amount != s.Amount {
				return fmt.Errorf("%w: %d, not %d", idempotency.ErrMismatch, t.Amount, s.Amount)
			}
			return nil
		},
		Settle:  func(ctx context.Context, s send, _ transfer) (send, error) { return set(ctx, s, "sent") },
		Unknown: func(ctx context.Context, s send) (send, error) { return set(ctx, s, "unknown") },
		Cancel:  func(ctx context.Context, s send) (send, error) { return set(ctx, s, "canceled") },
		Answer: func(s send) idempotency.Answer {
			status := map[string]int{"sent": 201, "canceled": 409}[s.Status]
			if status == 0 {
				status = 202
			}
			return idempotency.Answer{Status: status, Header: http.Header{"Content-Type": {"text/plain"}},
				Body: []byte(s.ID + " " + s.Status), Final: status != 202}
		},
	})
	return k, eff
}

// handled is what Keeper.Guarded returned.
type handled struct {
	Answer   idempotency.Answer
	Replayed bool
	Err      error
}

// run sends amount under key as a Guarded request of keeper k would, and
// returns its answer (or refusal) and the resource Run returned.
func (e *sendEnv) run(k *idempotency.Keeper, eff *idempotency.Effect[send, transfer], key string, amount int64) (handled, send, error) {
	return e.runAnswering(k, eff, key, amount, func(got send, err error) idempotency.Answer {
		if err != nil {
			return idempotency.Answer{Status: 502, Body: []byte(err.Error())}
		}
		return eff.Answer(got)
	})
}

// runAnswering is run with the handler's answer built by answer from what
// Run returned.
func (e *sendEnv) runAnswering(k *idempotency.Keeper, eff *idempotency.Effect[send, transfer], key string, amount int64,
	answer func(got send, err error) idempotency.Answer) (handled, send, error) {
	var (
		got    send
		runErr error
	)
	var res handled
	res.Answer, res.Replayed, res.Err = k.Guarded(context.Background(), idempotency.Input{
		Scope: "m1", Keys: []string{key}, Method: "POST", Path: "/sends", Route: "/sends",
	}, func(ctx context.Context, op *idempotency.Op, _ []byte) idempotency.Answer {
		got, runErr = eff.Run(ctx, op, func(ctx context.Context, c idempotency.Call) (send, error) {
			s := send{Scope: c.Scope, ID: c.ID, Amount: amount, Status: "pending"}
			return s, dbtx.Conn(ctx, e.db).Exec(`INSERT INTO sends (scope, id, amount, status) VALUES (?, ?, ?, ?)`,
				s.Scope, s.ID, s.Amount, s.Status).Error
		})
		return answer(got, runErr)
	})
	return res, got, runErr
}

func (e *sendEnv) state(t *testing.T, id string) idempotency.CallState {
	t.Helper()
	c, err := e.store.LockCall(context.Background(), "m1", id)
	require.NoError(t, err)
	return c.State
}

func (e *sendEnv) recordState(t *testing.T, key string) string {
	t.Helper()
	var state string
	err := e.db.Raw(`SELECT state FROM idempotency_records WHERE merchant_id = 'm1' AND idempotency_key = ?`, key).Row().Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return ""
	}
	require.NoError(t, err)
	return state
}

func eachDialect(t *testing.T, fn func(t *testing.T, e *sendEnv)) {
	for _, d := range gormtest.Dialects {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			fn(t, newSendEnv(t, d))
		})
	}
}

func TestEffectSettlesAndStoresTheAnswerWithIt(t *testing.T) {
	eachDialect(t, func(t *testing.T, e *sendEnv) {
		res, s, err := e.run(e.keeper, e.sends, "k1", 100)
		require.NoError(t, err)
		require.Equal(t, 201, res.Answer.Status)
		require.Equal(t, "sent", s.Status)
		require.Equal(t, idempotency.CallDone, e.state(t, s.ID))
		require.Equal(t, "completed", e.recordState(t, "k1"), "the answer committed with the settlement")
		require.Equal(t, 1, e.bank.count())

		again, _, _ := e.run(e.keeper, e.sends, "k1", 100)
		require.True(t, again.Replayed)
		require.Equal(t, res.Answer.Body, again.Answer.Body)
		require.Equal(t, 1, e.bank.count())
	})
}

// TestEffectStoredAnswerIsTheAnswer: phase 3 stores the Effect's Answer of
// the settled resource, and the handler answers with the same function of
// what Run returned: one answer. A handler that answers otherwise is a
// defect: its client gets the stored answer, which every replay sends, and
// the log says so.
func TestEffectStoredAnswerIsTheAnswer(t *testing.T) {
	eachDialect(t, func(t *testing.T, e *sendEnv) {
		var logged testkit.SyncBuffer
		e.cfg.Log = slog.New(slog.NewTextHandler(&logged, nil))
		k, eff := e.newKeeper(t)
		res, s, err := e.runAnswering(k, eff, "k-other", 100, func(send, error) idempotency.Answer {
			return idempotency.Answer{Status: 200, Body: []byte("not the stored answer"), Final: true}
		})
		require.NoError(t, err)
		require.NoError(t, res.Err)
		require.Equal(t, 201, res.Answer.Status)
		require.Equal(t, s.ID+" sent", string(res.Answer.Body), "the stored answer, not the handler's")
		require.Contains(t, logged.String(), "the handler's answer differs from the one its outside call stored")

		again, _, _ := e.run(k, eff, "k-other", 100)
		require.True(t, again.Replayed)
		require.Equal(t, res.Answer.Body, again.Answer.Body)
		require.Equal(t, 1, e.bank.count())

		// The handler's own answer, the Effect's: no such line.
		before := logged.String()
		res, _, err = e.run(k, eff, "k-same", 100)
		require.NoError(t, err)
		require.Equal(t, 201, res.Answer.Status)
		require.Equal(t, before, logged.String(), "nothing more logged")
	})
}

func TestEffectNotExecutedGivesTheCallBack(t *testing.T) {
	eachDialect(t, func(t *testing.T, e *sendEnv) {
		e.bank.next = []string{"down"}
		res, s, err := e.run(e.keeper, e.sends, "k1", 100)
		require.ErrorIs(t, err, idempotency.ErrNotExecuted, "502: nothing can have happened")
		require.Equal(t, 502, res.Answer.Status)
		require.Equal(t, idempotency.CallReady, e.state(t, s.ID), "the intent closed under its owner's fence")
		require.Zero(t, e.bank.count())

		// The same key resumes the same send: one transfer, the same id.
		res, again, err := e.run(e.keeper, e.sends, "k1", 100)
		require.NoError(t, err)
		require.Equal(t, 201, res.Answer.Status)
		require.Equal(t, s.ID, again.ID)
		require.Equal(t, 1, e.bank.count())
	})
}

func TestEffectUnknownIsResentUntilItExecutes(t *testing.T) {
	eachDialect(t, func(t *testing.T, e *sendEnv) {
		e.bank.next = []string{"lost"}
		res, s, err := e.run(e.keeper, e.sends, "k1", 100)
		require.NoError(t, err)
		require.Equal(t, 202, res.Answer.Status)
		require.Equal(t, idempotency.CallUnknown, e.state(t, s.ID))
		require.Equal(t, "executing", e.recordState(t, "k1"), "a 202 leaves the record open")

		// The reconciler finds the transfer under the key and settles it,
		// storing the client's answer under a claim on the record.
		n, err := e.keeper.Reconcile(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, idempotency.CallDone, e.state(t, s.ID))
		require.Equal(t, "completed", e.recordState(t, "k1"))
		require.Equal(t, 1, e.bank.count())
		replay, _, _ := e.run(e.keeper, e.sends, "k1", 100)
		require.True(t, replay.Replayed)
		require.Equal(t, 201, replay.Answer.Status)
	})
}

// TestEffectPausedOwnerCannotChargeTwice is the hole the intent closes: an
// owner records its intent and stalls before its call (a paused process);
// its lock runs out; a retry on another instance takes the record over. The
// retry finds the intent open: the outcome is unknown, never 502 and never
// canceled, and it re-sends under the same key. When the paused owner wakes
// and sends, the bank deduplicates: one transfer.
func TestEffectPausedOwnerCannotChargeTwice(t *testing.T) {
	eachDialect(t, func(t *testing.T, e *sendEnv) {
		e.bank.next = []string{"hold", "down"}
		paused := make(chan send, 1)
		go func() {
			_, s, _ := e.run(e.keeper, e.sends, "k1", 100)
			paused <- s
		}()
		var id string
		require.Eventually(t, func() bool {
			var n int64
			require.NoError(t, e.db.Raw(`SELECT count(*) FROM outside_calls WHERE state = 'calling'`).Row().Scan(&n))
			if n == 1 {
				require.NoError(t, e.db.Raw(`SELECT id FROM outside_calls`).Row().Scan(&id))
			}
			return n == 1
		}, 10*time.Second, 10*time.Millisecond, "the owner opened its intent and is stuck in the call")

		e.clock.Advance(31 * time.Second) // its lock runs out
		other, sends := e.newKeeper(t)
		// The retry takes over; its own call finds the bank down: it must
		// not answer 502, the paused owner's call may still land.
		res, _, err := e.run(other, sends, "k1", 100)
		require.NoError(t, err)
		require.Equal(t, 202, res.Answer.Status)
		require.Equal(t, idempotency.CallUnknown, e.state(t, id))

		// Past the cancel window, the reconciler never cancels it: it
		// re-sends, and the transfer happens once.
		e.clock.Advance(2 * time.Hour)
		n, err := other.Reconcile(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, idempotency.CallDone, e.state(t, id))
		require.Equal(t, 1, e.bank.count())

		close(e.bank.held) // the paused owner wakes and sends
		woke := <-paused
		require.Equal(t, id, woke.ID)
		require.Equal(t, 1, e.bank.count(), "the bank deduplicated the late call")
		var status string
		require.NoError(t, e.db.Raw(`SELECT status FROM sends WHERE id = ?`, id).Row().Scan(&status))
		require.Equal(t, "sent", status)
	})
}

// TestEffectFencedOwnerCallsNothing: an owner that lost its record before
// its intent fails there, and sends nothing.
func TestEffectFencedOwnerCallsNothing(t *testing.T) {
	eachDialect(t, func(t *testing.T, e *sendEnv) {
		sent := e.bank.sends
		_, err := e.sends.Run(context.Background(), nil, func(context.Context, idempotency.Call) (send, error) {
			return send{}, errors.New("never reached")
		})
		require.ErrorContains(t, err, "no operation owns a record", "without a Guarded request's operation there is no owner")
		require.Equal(t, sent, e.bank.sends)

		// The owner creates its send, then a retry takes the record over
		// (the owner's lock ran out) before the owner records its intent.
		e.bank.next = []string{"ok"}
		taken := false
		_, _, err = e.keeper.Guarded(context.Background(), idempotency.Input{
			Scope: "m1", Keys: []string{"k1"}, Method: "POST", Path: "/sends", Route: "/sends",
		}, func(ctx context.Context, op *idempotency.Op, _ []byte) idempotency.Answer {
			_, err := e.sends.Run(ctx, op, func(ctx context.Context, c idempotency.Call) (send, error) {
				s := send{Scope: c.Scope, ID: c.ID, Amount: 100, Status: "pending"}
				if err := dbtx.Conn(ctx, e.db).Exec(`INSERT INTO sends (scope, id, amount, status) VALUES (?, ?, ?, ?)`,
					s.Scope, s.ID, s.Amount, s.Status).Error; err != nil {
					return s, err
				}
				dbtx.AfterCommit(ctx, func() {
					// Another owner takes the record over right after
					// phase 1 commits.
					rec, err := e.store.Get(context.Background(), "m1", "k1", e.clock.Now())
					require.NoError(t, err)
					_, err = e.store.TakeOver(context.Background(), "m1", "k1", rec.Fence, e.clock.Now().Add(time.Hour), e.clock.Now().Add(2*time.Hour))
					require.NoError(t, err)
					taken = true
				})
				return s, nil
			})
			require.ErrorIs(t, err, idempotency.ErrFenced)
			return idempotency.Answer{Status: 409}
		})
		require.ErrorIs(t, err, idempotency.ErrInProgress, "the fenced owner sends its client to the record's new owner")
		require.True(t, taken)
		require.Equal(t, sent, e.bank.sends, "no call without an intent")
		require.Zero(t, e.bank.count())
	})
}

func TestEffectCancelsWhatNeverReachedTheOutside(t *testing.T) {
	eachDialect(t, func(t *testing.T, e *sendEnv) {
		e.bank.next = []string{"down"}
		_, s, err := e.run(e.keeper, e.sends, "k1", 100)
		require.ErrorIs(t, err, idempotency.ErrNotExecuted)

		// Not yet due: the reconciler only looks.
		e.clock.Advance(time.Minute)
		n, err := e.keeper.Reconcile(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, idempotency.CallReady, e.state(t, s.ID))

		e.clock.Advance(time.Hour)
		n, err = e.keeper.Reconcile(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, idempotency.CallCanceled, e.state(t, s.ID))
		require.Equal(t, "completed", e.recordState(t, "k1"), "the key answers the cancel from now on")
		res, _, _ := e.run(e.keeper, e.sends, "k1", 100)
		require.True(t, res.Replayed)
		require.Equal(t, 409, res.Answer.Status)
		require.Zero(t, e.bank.count())
	})
}

func TestEffectMismatchFlagsAndAppliesNothing(t *testing.T) {
	eachDialect(t, func(t *testing.T, e *sendEnv) {
		e.bank.next = []string{"lost"}
		_, s, err := e.run(e.keeper, e.sends, "k1", 100)
		require.NoError(t, err)
		// Someone made a transfer of another amount under our key.
		e.bank.mu.Lock()
		key := e.bank.transfers
		for k, tr := range key {
			tr.Amount = 1
			key[k] = tr
		}
		e.bank.mu.Unlock()

		_, err = e.keeper.Reconcile(context.Background())
		require.NoError(t, err)
		require.Equal(t, idempotency.CallFlagged, e.state(t, s.ID))
		var status string
		require.NoError(t, e.db.Raw(`SELECT status FROM sends WHERE id = ?`, s.ID).Row().Scan(&status))
		require.Equal(t, "unknown", status, "nothing applied")
		require.Equal(t, "executing", e.recordState(t, "k1"), "no final answer for a flagged call")
		var due *time.Time
		require.NoError(t, e.db.Raw(`SELECT due_at FROM outside_calls WHERE id = ?`, s.ID).Row().Scan(&due))
		require.Nil(t, due, "out of the reconcile rounds")
	})
}

// TestEffectRulingWhileARequestHoldsTheRecord: an operator accepts a
// flagged call while a retry of its client's key holds the record, so the
// ruling cannot store the answer itself; it leaves the call due, and the
// reconciler stores the answer once that request's lock has run out,
// without another retry.
func TestEffectRulingWhileARequestHoldsTheRecord(t *testing.T) {
	eachDialect(t, func(t *testing.T, e *sendEnv) {
		ctx := context.Background()
		e.bank.next = []string{"lost"}
		_, s, err := e.run(e.keeper, e.sends, "k1", 100)
		require.NoError(t, err)
		e.bank.mu.Lock()
		for k, tr := range e.bank.transfers {
			tr.Amount = 1 // not what we asked for
			e.bank.transfers[k] = tr
		}
		e.bank.mu.Unlock()
		_, err = e.keeper.Reconcile(ctx)
		require.NoError(t, err)
		require.Equal(t, idempotency.CallFlagged, e.state(t, s.ID))

		// A retry takes the record over and holds it until released.
		holding, release := make(chan struct{}), make(chan struct{})
		done := make(chan handled, 1)
		go func() {
			res, _, _ := e.runAnswering(e.keeper, e.sends, "k1", 100, func(got send, err error) idempotency.Answer {
				close(holding)
				<-release
				return e.sends.Answer(got)
			})
			done <- res
		}()
		<-holding
		ruled, err := e.sends.Rule(ctx, "m1", s.ID, &transfer{Key: s.ID, Amount: 100, OK: true})
		require.NoError(t, err)
		require.Equal(t, "sent", ruled.Status)
		require.Equal(t, idempotency.CallDone, e.state(t, s.ID))
		require.Equal(t, "executing", e.recordState(t, "k1"), "the request holds the record: the ruling stores nothing")
		var due *time.Time
		require.NoError(t, e.db.Raw(`SELECT due_at FROM outside_calls WHERE id = ?`, s.ID).Row().Scan(&due))
		require.NotNil(t, due, "left due, for the reconciler to store the answer")
		close(release)
		res := <-done
		require.NoError(t, res.Err)
		require.Equal(t, 202, res.Answer.Status, "the retry saw the call flagged")
		require.Equal(t, "executing", e.recordState(t, "k1"), "its answer, not final, is not stored")

		e.clock.Advance(31 * time.Second)
		_, err = e.keeper.Reconcile(ctx)
		require.NoError(t, err)
		require.Equal(t, "completed", e.recordState(t, "k1"), "the reconciler stored the ruled answer")
		replay, _, err := e.run(e.keeper, e.sends, "k1", 100)
		require.NoError(t, err)
		require.True(t, replay.Replayed)
		require.Equal(t, 201, replay.Answer.Status)
		require.Equal(t, 1, e.bank.count(), "nothing sent again")
	})
}

// TestEffectRetryAfterTheRowsWereLost: a failover lost the send and its
// record; the client's retry derives the same id and key, so the bank
// answers the transfer it already made instead of making another.
func TestEffectRetryAfterTheRowsWereLost(t *testing.T) {
	eachDialect(t, func(t *testing.T, e *sendEnv) {
		_, first, err := e.run(e.keeper, e.sends, "k1", 100)
		require.NoError(t, err)
		for _, table := range []string{"sends", "outside_calls", "idempotency_records"} {
			require.NoError(t, e.db.Exec(`DELETE FROM `+table).Error)
		}
		// Another instance (this one's memory still holds the answer).
		other, sends := e.newKeeper(t)
		_, again, err := e.run(other, sends, "k1", 100)
		require.NoError(t, err)
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, 1, e.bank.count())

		// A key reused after its record expired (the send survives) is a
		// new operation: a new generation, a new transfer.
		e.clock.Advance(25 * time.Hour)
		_, reused, err := e.run(other, sends, "k1", 100)
		require.NoError(t, err)
		require.NotEqual(t, first.ID, reused.ID)
		require.Equal(t, 2, e.bank.count())
	})
}
