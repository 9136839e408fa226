// Package storetest is the contract every idempotency.Store must keep, with
// the janitor's purges (janitor.Store), as one suite that any store runs
// with one call, against its own database:
//
//	func TestStoreContract(t *testing.T) {
//		s := mystore.New(openTestDatabase(t))
//		storetest.Run(t, storetest.Subject{Store: s, Tx: s})
//	}
//
// It checks what the Keeper relies on: insert-if-absent under concurrency,
// replay of a stored answer byte for byte, scoping, takeover with fencing,
// release, expiry, purging in batches, and joining the caller's transaction.
package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/janitor"
)

// Store is a store under test: the core's port and the janitor's purges.
type Store interface {
	idempotency.Store
	janitor.Store
}

// Subject is a store under test.
type Subject struct {
	// Store is the store, over an empty table.
	Store Store
	// Tx opens transactions the Store joins; nil skips the transaction
	// cases (a store without transactions cannot serve Atomic routes).
	Tx idempotency.Transactor
	// TombstoneTTL is how long the store keeps a tombstone after a record
	// expired; zero for a store that keeps none.
	TombstoneTTL time.Duration
}

const ttl = 24 * time.Hour

func executing(merchant, key string, now time.Time) *idempotency.Record {
	return &idempotency.Record{
		Scope: merchant, Key: key, Method: "POST", Path: "/v1/things", Fingerprint: "fp-1",
		State: idempotency.StateExecuting, Point: idempotency.PointStarted,
		LockedUntil: now.Add(30 * time.Second), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(ttl),
	}
}

// fixture is what Run sets up for the groups of the contract: the subject
// (its store), the first moment, the recovery points and a stored answer.
type fixture struct {
	subject          Subject
	t0               time.Time
	charged, created string
	resp             idempotency.Answer
}

// Run runs the whole contract against subject, as subtests of t.
func Run(t *testing.T, subject Subject) {
	t.Helper()
	ctx := context.Background()
	charged := "charged:ch_1"
	created := "payment_created:pay_1"
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	// A stored answer as the Keeper hands it over: final, with the headers
	// that describe the result, canonically spelled.
	resp := idempotency.Answer{Status: 201, Header: http.Header{
		"Content-Type": {"application/json"}, "Location": {"/v1/things/1"}, "Etag": {`"1"`}, "Last-Modified": {"Fri, 02 Jan 2026 03:04:05 GMT"},
	}, Body: []byte(`{"id":"1"}`), Final: true}
	f := fixture{subject: subject, t0: t0, charged: charged, created: created, resp: resp}

	reserving(t, ctx, f)
	takeovers(t, ctx, f)
	expiry(t, ctx, f)
	t.Run("outside calls", func(t *testing.T) { calls(t, subject, t0) })
	purging(t, ctx, f)
	transactions(t, ctx, f)
	digestAndEmptyTx(t, ctx, f)
}

// reserving checks that a key is reserved once, replayed byte for byte and scoped to the merchant.
func reserving(t *testing.T, ctx context.Context, f fixture) {
	s, t0, resp := f.subject.Store, f.t0, f.resp
	t.Run("new key reserves, second insert finds it", func(t *testing.T) {
		rec := executing("m1", "new-key", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.Equal(t, idempotency.FirstFence(t0), rec.Fence)
		require.ErrorIs(t, s.Insert(ctx, executing("m1", "new-key", t0)), idempotency.ErrKeyExists)

		got, err := s.Get(ctx, "m1", "new-key", t0)
		require.NoError(t, err)
		require.Equal(t, idempotency.StateExecuting, got.State)
		require.Equal(t, "fp-1", got.Fingerprint)
		require.Equal(t, t0, got.CreatedAt)
		require.Nil(t, got.Answer)
	})

	t.Run("completed record replays its response byte for byte", func(t *testing.T) {
		rec := executing("m1", "replay", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.NoError(t, s.Complete(ctx, "m1", "replay", rec.Fence, resp, t0))
		got, err := s.Get(ctx, "m1", "replay", t0)
		require.NoError(t, err)
		require.Equal(t, idempotency.StateCompleted, got.State)
		require.Equal(t, &resp, got.Answer)
	})

	t.Run("inserted already complete", func(t *testing.T) {
		rec := executing("m1", "complete-insert", t0)
		rec.State, rec.Answer = idempotency.StateCompleted, &resp
		require.NoError(t, s.Insert(ctx, rec))
		got, err := s.Get(ctx, "m1", "complete-insert", t0)
		require.NoError(t, err)
		require.Equal(t, &resp, got.Answer)
	})

	t.Run("keys are scoped to the merchant", func(t *testing.T) {
		require.NoError(t, s.Insert(ctx, executing("m1", "shared", t0)))
		other := executing("m2", "shared", t0)
		other.Fingerprint = "fp-other"
		require.NoError(t, s.Insert(ctx, other))
		got, err := s.Get(ctx, "m2", "shared", t0)
		require.NoError(t, err)
		require.Equal(t, "fp-other", got.Fingerprint)
		_, err = s.Get(ctx, "m3", "shared", t0)
		require.ErrorIs(t, err, idempotency.ErrNotFound)
	})

	t.Run("fifty concurrent inserts, one owner", func(t *testing.T) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := 0, 0
		for range 50 {
			wg.Go(func() {
				err := s.Insert(ctx, executing("m1", "race", t0))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case errors.Is(err, idempotency.ErrKeyExists):
					lost++
				default:
					t.Errorf("insert: %v", err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, 1, won)
		require.Equal(t, 49, lost)
	})
}

// takeovers checks that a stale lock is taken over with fencing, and what a release deletes or unlocks.
func takeovers(t *testing.T, ctx context.Context, f fixture) {
	s, t0, resp, charged, created := f.subject.Store, f.t0, f.resp, f.charged, f.created
	t.Run("stale lock is taken over and the old owner is fenced out", func(t *testing.T) {
		rec := executing("m1", "takeover", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.NoError(t, s.Checkpoint(ctx, "m1", "takeover", rec.Fence, charged, t0))

		// Still locked: no takeover.
		_, err := s.TakeOver(ctx, "m1", "takeover", rec.Fence, t0.Add(time.Second), t0.Add(31*time.Second))
		require.ErrorIs(t, err, idempotency.ErrFenced)

		later := t0.Add(31 * time.Second)
		taken, err := s.TakeOver(ctx, "m1", "takeover", rec.Fence, later, later.Add(30*time.Second))
		require.NoError(t, err)
		require.Equal(t, rec.Fence+1, taken.Fence, "the record as the takeover left it")
		require.Equal(t, charged, taken.Point, "the new owner resumes from the recovery point")
		require.Equal(t, later.Add(30*time.Second), taken.LockedUntil)
		require.Equal(t, t0, taken.CreatedAt)
		require.Equal(t, idempotency.StateExecuting, taken.State)
		// A second contender with the same view loses.
		_, err = s.TakeOver(ctx, "m1", "takeover", rec.Fence, later, later.Add(30*time.Second))
		require.ErrorIs(t, err, idempotency.ErrFenced)

		got, err := s.Get(ctx, "m1", "takeover", later)
		require.NoError(t, err)
		require.Equal(t, taken, got)

		// The stale owner can write nothing.
		require.ErrorIs(t, s.Checkpoint(ctx, "m1", "takeover", rec.Fence, "other", later), idempotency.ErrFenced)
		require.ErrorIs(t, s.Complete(ctx, "m1", "takeover", rec.Fence, resp, later), idempotency.ErrFenced)
		require.ErrorIs(t, s.Release(ctx, "m1", "takeover", rec.Fence, later), idempotency.ErrFenced)
		require.NoError(t, s.Complete(ctx, "m1", "takeover", got.Fence, resp, later))
	})

	t.Run("release deletes a record with nothing durable", func(t *testing.T) {
		rec := executing("m1", "release-fresh", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.NoError(t, s.Release(ctx, "m1", "release-fresh", rec.Fence, t0))
		_, err := s.Get(ctx, "m1", "release-fresh", t0)
		require.ErrorIs(t, err, idempotency.ErrNotFound)
		require.NoError(t, s.Insert(ctx, executing("m1", "release-fresh", t0)), "the key is free again")
	})

	t.Run("release keeps and unlocks a record past its first step", func(t *testing.T) {
		rec := executing("m1", "release-resume", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.NoError(t, s.Checkpoint(ctx, "m1", "release-resume", rec.Fence, created, t0))
		require.NoError(t, s.Release(ctx, "m1", "release-resume", rec.Fence, t0.Add(time.Second)))
		got, err := s.Get(ctx, "m1", "release-resume", t0.Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, created, got.Point)
		require.False(t, got.LockedUntil.After(t0.Add(time.Second)), "unlocked: a retry may take it over at once")
		_, err = s.TakeOver(ctx, "m1", "release-resume", got.Fence, t0.Add(time.Second), t0.Add(time.Minute))
		require.NoError(t, err)
	})

	t.Run("a takeover returns the point committed after the caller read the record", func(t *testing.T) {
		// The old owner, slow but alive, checkpoints between a retry's
		// read and its takeover: the fence did not move, so the takeover
		// succeeds, and it must hand over the new point, not the one read.
		rec := executing("m1", "stale-read", t0)
		require.NoError(t, s.Insert(ctx, rec))
		later := t0.Add(31 * time.Second)
		read, err := s.Get(ctx, "m1", "stale-read", later)
		require.NoError(t, err)
		require.Equal(t, idempotency.PointStarted, read.Point)
		require.NoError(t, s.Checkpoint(ctx, "m1", "stale-read", rec.Fence, created, later))
		taken, err := s.TakeOver(ctx, "m1", "stale-read", read.Fence, later, later.Add(30*time.Second))
		require.NoError(t, err)
		require.Equal(t, created, taken.Point)
	})
}

// expiry checks what an expired key becomes, with tombstones or without, and fences its old owner out.
func expiry(t *testing.T, ctx context.Context, f fixture) {
	s, subject, t0, resp, created := f.subject.Store, f.subject, f.t0, f.resp, f.created
	t.Run("expired record is absent and its key new again", func(t *testing.T) {
		if subject.TombstoneTTL > 0 {
			t.Skip("with tombstones an expired key is not new again (see tombstones)")
		}
		rec := executing("m1", "ttl", t0)
		require.NoError(t, s.Insert(ctx, rec))
		require.NoError(t, s.Complete(ctx, "m1", "ttl", rec.Fence, resp, t0))
		_, err := s.Get(ctx, "m1", "ttl", t0.Add(ttl-time.Second))
		require.NoError(t, err)

		after := t0.Add(ttl)
		_, err = s.Get(ctx, "m1", "ttl", after)
		require.ErrorIs(t, err, idempotency.ErrNotFound)
		fresh := executing("m1", "ttl", after)
		fresh.Fingerprint = "fp-new"
		require.NoError(t, s.Insert(ctx, fresh))
		require.Equal(t, idempotency.FirstFence(after), fresh.Fence, "the fence keeps growing across reuse")
		require.Greater(t, fresh.Fence, rec.Fence)
		got, err := s.Get(ctx, "m1", "ttl", after)
		require.NoError(t, err)
		require.Equal(t, "fp-new", got.Fingerprint)
		require.Nil(t, got.Answer)
		require.Equal(t, idempotency.StateExecuting, got.State)
	})

	t.Run("an expired record's owner cannot write into the key's next record", func(t *testing.T) {
		// The owner of the first record stalls past its TTL; the janitor
		// deletes the record, and the key is used again. Nothing remembers
		// the first fence, yet the owner's writes must all be refused.
		rec := executing("m1", "reused", t0)
		require.NoError(t, s.Insert(ctx, rec))
		stale := rec.Fence
		after := t0.Add(ttl).Add(time.Minute)
		if subject.TombstoneTTL > 0 {
			after = t0.Add(ttl).Add(subject.TombstoneTTL).Add(time.Minute)
		}
		for {
			n, err := s.PurgeExpired(ctx, after, 100)
			require.NoError(t, err)
			if n == 0 {
				break
			}
		}
		_, err := s.PurgeTombstones(ctx, after, 100)
		require.NoError(t, err)
		next := executing("m1", "reused", after)
		require.NoError(t, s.Insert(ctx, next))
		require.Greater(t, next.Fence, stale)
		require.ErrorIs(t, s.Checkpoint(ctx, "m1", "reused", stale, created, after), idempotency.ErrFenced)
		require.ErrorIs(t, s.Complete(ctx, "m1", "reused", stale, resp, after), idempotency.ErrFenced)
		require.ErrorIs(t, s.Release(ctx, "m1", "reused", stale, after), idempotency.ErrFenced)
		got, err := s.Get(ctx, "m1", "reused", after)
		require.NoError(t, err)
		require.Equal(t, idempotency.StateExecuting, got.State)
		require.Equal(t, idempotency.PointStarted, got.Point)
	})

	t.Run("tombstones", func(t *testing.T) {
		if subject.TombstoneTTL == 0 {
			_, err := s.Get(ctx, "m1", "ttl", t0.Add(10*ttl))
			require.ErrorIs(t, err, idempotency.ErrNotFound, "a store without tombstones remembers nothing")
			n, err := s.PurgeTombstones(ctx, t0.Add(10*ttl), 10)
			require.NoError(t, err)
			require.Zero(t, n)
			return
		}
		tombstones(t, subject, t0)
	})
}

// purging checks that the purge deletes only expired records, in batches.
func purging(t *testing.T, ctx context.Context, f fixture) {
	s, t0 := f.subject.Store, f.t0
	t.Run("purge deletes only expired records, in batches", func(t *testing.T) {
		for i := range 7 {
			rec := executing("purge", fmt.Sprintf("old-%d", i), t0)
			rec.ExpiresAt = t0.Add(time.Minute)
			require.NoError(t, s.Insert(ctx, rec))
		}
		require.NoError(t, s.Insert(ctx, executing("purge", "live", t0)))
		now := t0.Add(time.Hour)
		n, err := s.PurgeExpired(ctx, now, 5)
		require.NoError(t, err)
		require.Equal(t, 5, n)
		n, err = s.PurgeExpired(ctx, now, 5)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		n, err = s.PurgeExpired(ctx, now, 5)
		require.NoError(t, err)
		require.Equal(t, 0, n)
		_, err = s.Get(ctx, "purge", "live", now)
		require.NoError(t, err)
	})
}

// transactions checks that an insert joins the caller's transaction, to roll back or commit with it.
func transactions(t *testing.T, ctx context.Context, f fixture) {
	s, subject, t0 := f.subject.Store, f.subject, f.t0
	t.Run("insert joins the caller's transaction and rolls back with it", func(t *testing.T) {
		if subject.Tx == nil {
			t.Skip("the store offers no transactions")
		}
		boom := errors.New("boom")
		err := subject.Tx.InTx(ctx, func(ctx context.Context) error {
			require.NoError(t, s.Insert(ctx, executing("m1", "tx-rollback", t0)))
			return boom
		})
		require.ErrorIs(t, err, boom)
		_, err = s.Get(ctx, "m1", "tx-rollback", t0)
		require.ErrorIs(t, err, idempotency.ErrNotFound)
	})

	t.Run("insert joins the caller's transaction and commits with it", func(t *testing.T) {
		if subject.Tx == nil {
			t.Skip("the store offers no transactions")
		}
		require.NoError(t, subject.Tx.InTx(ctx, func(ctx context.Context) error {
			return s.Insert(ctx, executing("m1", "tx-commit", t0))
		}))
		_, err := s.Get(ctx, "m1", "tx-commit", t0)
		require.NoError(t, err)
	})

	t.Run("insert in the caller's transaction: a live key refuses it, an expired one is replaced", func(t *testing.T) {
		if subject.Tx == nil {
			t.Skip("the store offers no transactions")
		}
		// A store may send the insert with the commit and decide there
		// (gormstore's pipeline): the refusal is the transaction's error.
		insertInTx := func(rec *idempotency.Record) error {
			return subject.Tx.InTx(ctx, func(ctx context.Context) error { return s.Insert(ctx, rec) })
		}
		live := executing("m1", "tx-live", t0)
		require.NoError(t, insertInTx(live))
		require.Equal(t, idempotency.FirstFence(t0), live.Fence)
		second := executing("m1", "tx-live", t0)
		second.Fingerprint = "fp-2"
		require.ErrorIs(t, insertInTx(second), idempotency.ErrKeyExists)
		got, err := s.Get(ctx, "m1", "tx-live", t0)
		require.NoError(t, err)
		require.Equal(t, "fp-1", got.Fingerprint, "the live record is untouched")
		require.Equal(t, live.Fence, got.Fence)

		old := executing("m1", "tx-expired", t0)
		require.NoError(t, insertInTx(old))
		after := t0.Add(ttl)
		fresh := executing("m1", "tx-expired", after)
		fresh.Fingerprint = "fp-new"
		if subject.TombstoneTTL > 0 {
			require.ErrorIs(t, insertInTx(fresh), idempotency.ErrKeyExists, "with tombstones an expired key is not new again")
			return
		}
		require.NoError(t, insertInTx(fresh))
		require.Equal(t, idempotency.FirstFence(after), fresh.Fence, "the fence keeps growing across reuse")
		got, err = s.Get(ctx, "m1", "tx-expired", after)
		require.NoError(t, err)
		require.Equal(t, "fp-new", got.Fingerprint)
	})
}

// digestAndEmptyTx checks that the digest as sent is kept, and that an empty transaction commits nothing and fails nothing.
func digestAndEmptyTx(t *testing.T, ctx context.Context, f fixture) {
	s, subject, t0 := f.subject.Store, f.subject, f.t0
	t.Run("the digest of the request as sent is kept, in a transaction or not, and replaced with an expired record", func(t *testing.T) {
		// Record.Sent lets a retry of the very same bytes skip
		// canonicalizing on an instance that never saw the key: the
		// store must give back what it was given, and zero for none.
		withSent := func(key, sent string, at time.Time) *idempotency.Record {
			rec := executing("m1", key, at)
			rec.Sent = sha256.Sum256([]byte(sent))
			return rec
		}
		plain := withSent("sent-plain", "first bytes", t0)
		require.NoError(t, s.Insert(ctx, plain))
		require.NoError(t, s.Insert(ctx, executing("m1", "sent-none", t0)))
		got, err := s.Get(ctx, "m1", "sent-plain", t0)
		require.NoError(t, err)
		require.Equal(t, plain.Sent, got.Sent)
		got, err = s.Get(ctx, "m1", "sent-none", t0)
		require.NoError(t, err)
		require.Zero(t, got.Sent, "a record stored without a digest has none")

		after := t0.Add(ttl)
		if subject.TombstoneTTL == 0 {
			replaced := withSent("sent-plain", "other bytes", after)
			require.NoError(t, s.Insert(ctx, replaced))
			got, err = s.Get(ctx, "m1", "sent-plain", after)
			require.NoError(t, err)
			require.Equal(t, replaced.Sent, got.Sent, "the expired record's digest is replaced too")
			require.NotEqual(t, plain.Sent, got.Sent)
		}
		if subject.Tx == nil {
			return
		}
		inTx := withSent("sent-tx", "bytes in a transaction", t0)
		require.NoError(t, subject.Tx.InTx(ctx, func(ctx context.Context) error { return s.Insert(ctx, inTx) }))
		got, err = s.Get(ctx, "m1", "sent-tx", t0)
		require.NoError(t, err)
		require.Equal(t, inTx.Sent, got.Sent)
	})

	t.Run("a transaction with no statement commits nothing and fails nothing", func(t *testing.T) {
		if subject.Tx == nil {
			t.Skip("the store offers no transactions")
		}
		require.NoError(t, subject.Tx.InTx(ctx, func(context.Context) error { return nil }))
	})
}

// tombstones is the contract of a store that keeps them: an expired key is
// never new again until its tombstone time has passed, before and after the
// purge, and the purge leaves the tombstone in the same step.
func tombstones(t *testing.T, subject Subject, t0 time.Time) {
	s, tombstoneTTL := subject.Store, subject.TombstoneTTL
	ctx := context.Background()
	resp := idempotency.Answer{Status: 201, Header: http.Header{}, Body: []byte(`{}`), Final: true}
	rec := executing("tomb", "late", t0)
	require.NoError(t, s.Insert(ctx, rec))
	require.NoError(t, s.Complete(ctx, "tomb", "late", rec.Fence, resp, t0))
	expiry := t0.Add(ttl)

	live, err := s.Get(ctx, "tomb", "late", expiry.Add(-time.Second))
	require.NoError(t, err)
	require.Equal(t, idempotency.StateCompleted, live.State, "a live record is read as it is")

	after := expiry.Add(time.Second)
	require.ErrorIs(t, s.Insert(ctx, executing("tomb", "late", after)), idempotency.ErrKeyExists,
		"not replaced before the purge")
	stone, err := s.Get(ctx, "tomb", "late", after)
	require.NoError(t, err, "expired: read as such, not absent")
	require.Equal(t, idempotency.StateExpired, stone.State)
	require.Equal(t, "fp-1", stone.Fingerprint)
	require.Equal(t, t0, stone.CreatedAt, "first seen")
	require.Equal(t, expiry, stone.ExpiresAt)
	require.Nil(t, stone.Answer, "an expired record's answer is not read")

	n, err := s.PurgeExpired(ctx, after, 100)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 1)
	require.ErrorIs(t, s.Insert(ctx, executing("tomb", "late", after)), idempotency.ErrKeyExists,
		"not inserted over its tombstone after the purge")
	if subject.Tx != nil {
		err := subject.Tx.InTx(ctx, func(ctx context.Context) error { return s.Insert(ctx, executing("tomb", "late", after)) })
		require.ErrorIs(t, err, idempotency.ErrKeyExists, "nor in the caller's transaction")
	}
	stone, err = s.Get(ctx, "tomb", "late", after)
	require.NoError(t, err, "the purge left the tombstone")
	require.Equal(t, idempotency.StateExpired, stone.State)
	require.Equal(t, "fp-1", stone.Fingerprint)
	require.Equal(t, t0, stone.CreatedAt)
	require.Equal(t, expiry, stone.ExpiresAt, "the record's expiry, not the tombstone's")
	_, err = s.Get(ctx, "tomb-other", "late", after)
	require.ErrorIs(t, err, idempotency.ErrNotFound, "scoped")

	// A key never used has no tombstone and inserts as ever.
	require.NoError(t, s.Insert(ctx, executing("tomb", "fresh", after)))

	// Past the tombstone's time the key is new again, and the tombstone is
	// purged in batches.
	gone := expiry.Add(tombstoneTTL).Add(time.Second)
	_, err = s.Get(ctx, "tomb", "late", gone)
	require.ErrorIs(t, err, idempotency.ErrNotFound)
	n, err = s.PurgeTombstones(ctx, gone, 100)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 1)
	again := executing("tomb", "late", gone)
	require.NoError(t, s.Insert(ctx, again), "the key is new once its tombstone is gone")

	// An expired record the janitor never purged is replaced once its
	// tombstone time has passed too.
	old := executing("tomb", "never-purged", t0)
	require.NoError(t, s.Insert(ctx, old))
	require.NoError(t, s.Insert(ctx, executing("tomb", "never-purged", gone)))
}

// calls is the contract of a store's outside calls: one per resource, read
// back as written, counted by client key, and listed when due, fairly.
func calls(t *testing.T, subject Subject, t0 time.Time) {
	callsReadBack(t, subject, t0)
	callsCounted(t, subject, t0)
	callsDue(t, subject, t0)
}

// thingCall is an outside call of kind thing, ready, attempted and created
// at t0, due at due.
func thingCall(t0 time.Time, scope, id, clientKey string, due time.Time) *idempotency.Call {
	return &idempotency.Call{
		Scope: scope, ID: id, Kind: "thing", ClientKey: clientKey, Key: "key-" + id, KeyVersion: 1, KeyFingerprint: "0123456789abcdef",
		State: idempotency.CallReady, AttemptedAt: t0, DueAt: due, TraceParent: "00-trace",
		CreatedAt: t0, UpdatedAt: t0,
	}
}

// callsReadBack checks that a call is one per resource, scoped, and read back as written and as saved.
func callsReadBack(t *testing.T, subject Subject, t0 time.Time) {
	s, ctx := subject.Store, context.Background()
	c := thingCall(t0, "c1", "th_1", "ck", t0.Add(time.Minute))
	require.NoError(t, s.InsertCall(ctx, c))
	require.ErrorIs(t, s.InsertCall(ctx, thingCall(t0, "c1", "th_1", "ck", t0)), idempotency.ErrKeyExists)
	_, err := s.LockCall(ctx, "c1", "th_none")
	require.ErrorIs(t, err, idempotency.ErrNotFound)
	_, err = s.LockCall(ctx, "c2", "th_1")
	require.ErrorIs(t, err, idempotency.ErrNotFound, "scoped")
	got, err := s.LockCall(ctx, "c1", "th_1")
	require.NoError(t, err)
	require.Equal(t, c, got, "read back as written, the zero intent time included")

	got.State, got.IntentFence, got.IntentAt, got.Checks, got.UpdatedAt = idempotency.CallCalling, 3, t0.Add(time.Second), 2, t0.Add(time.Second)
	got.DueAt = time.Time{}
	require.NoError(t, s.SaveCall(ctx, got))
	again, err := s.LockCall(ctx, "c1", "th_1")
	require.NoError(t, err)
	require.Equal(t, got, again)
	require.ErrorIs(t, s.SaveCall(ctx, thingCall(t0, "c1", "th_none", "", t0)), idempotency.ErrNotFound)
}

// callsCounted checks that calls are counted by client key, kind and record lifetime, and that a clash leaves a transaction going.
func callsCounted(t *testing.T, subject Subject, t0 time.Time) {
	s, ctx := subject.Store, context.Background()
	// Calls are counted by the record lifetime they were made under: those
	// of earlier records of the key (and those that do not say) count,
	// the current record's do not.
	second := thingCall(t0, "c1", "th_2", "ck", t0)
	second.RecordCreatedAt = t0.Add(time.Hour)
	require.NoError(t, s.InsertCall(ctx, second))
	third := thingCall(t0, "c1", "th_2b", "ck", t0)
	third.RecordCreatedAt = t0.Add(2 * time.Hour)
	require.NoError(t, s.InsertCall(ctx, third))
	require.NoError(t, s.InsertCall(ctx, thingCall(t0, "c1", "th_3", "other", t0)))
	for _, tc := range []struct {
		created time.Time
		want    int
	}{{t0, 1}, {t0.Add(time.Hour), 1}, {t0.Add(90 * time.Minute), 2}, {t0.Add(2 * time.Hour), 2}, {t0.Add(3 * time.Hour), 3}} {
		n, err := s.CountCalls(ctx, "c1", "ck", "thing", tc.created)
		require.NoError(t, err)
		require.Equal(t, tc.want, n, "calls before a record created at %v", tc.created)
	}
	n, err := s.CountCalls(ctx, "c1", "ck", "another kind", t0.Add(3*time.Hour))
	require.NoError(t, err)
	require.Zero(t, n)
	got, err := s.LockCall(ctx, "c1", "th_2")
	require.NoError(t, err)
	require.Equal(t, second, got, "the record's lifetime read back")

	if subject.Tx != nil {
		// A clash inside a transaction is an answer: the transaction goes
		// on and commits what else it wrote.
		require.NoError(t, subject.Tx.InTx(ctx, func(ctx context.Context) error {
			require.ErrorIs(t, s.InsertCall(ctx, thingCall(t0, "c1", "th_1", "ck", t0)), idempotency.ErrKeyExists)
			return s.InsertCall(ctx, thingCall(t0, "c1", "th_4", "ck4", t0))
		}))
		_, err := s.LockCall(ctx, "c1", "th_4")
		require.NoError(t, err, "committed after the clash")
	}
}

// callsDue checks that due calls are claimed two per scope at most, the longest due first, under a lease.
func callsDue(t *testing.T, subject Subject, t0 time.Time) {
	s, ctx := subject.Store, context.Background()
	// Due: three of scope d1, one of d2, one settled (no due time) and one
	// not due yet. Two per scope at most, the longest due first.
	for i, d := range []struct {
		scope, id string
		due       time.Time
	}{
		{"d1", "th_a", t0.Add(-3 * time.Minute)}, {"d1", "th_b", t0.Add(-2 * time.Minute)}, {"d1", "th_c", t0.Add(-time.Minute)},
		{"d2", "th_d", t0.Add(-90 * time.Second)}, {"d2", "th_e", time.Time{}}, {"d2", "th_f", t0.Add(time.Hour)},
	} {
		require.NoError(t, s.InsertCall(ctx, thingCall(t0, d.scope, d.id, fmt.Sprint("due-", i), d.due)))
	}
	lease := t0.Add(time.Minute)
	claim := func(now time.Time, limit int) []string {
		due, err := s.ClaimDue(ctx, now, now.Add(time.Minute), limit, 2)
		require.NoError(t, err)
		var ids []string
		for _, c := range due {
			if c.Scope == "d1" || c.Scope == "d2" {
				require.Equal(t, now.Add(time.Minute), c.DueAt, "returned as moved")
				ids = append(ids, c.ID)
			}
		}
		return ids
	}
	require.Equal(t, []string{"th_a", "th_b", "th_d"}, claim(t0, 10), "th_c is the third of d1: left for the next round")
	// Claimed calls are out of the list until their lease runs out.
	require.Equal(t, []string{"th_c"}, claim(t0, 10))
	require.Empty(t, claim(t0.Add(30*time.Second), 10))
	got, err := s.LockCall(ctx, "d1", "th_a")
	require.NoError(t, err)
	require.Equal(t, lease, got.DueAt)
	require.Equal(t, []string{"th_a", "th_b", "th_d"}, claim(lease, 10), "due again once the lease ran out")
	due, err := s.ClaimDue(ctx, t0.Add(time.Hour), t0.Add(2*time.Hour), 1, 2)
	require.NoError(t, err)
	require.Len(t, due, 1)
}
