package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/janitor"
)

// Store is an idempotency store as the keeper and the janitor use it.
type Store interface {
	idempotency.Store
	janitor.Store
}

// InstrumentStore returns s with its failures counted in
// idempotency_store_errors_total under the label store (the dialect:
// postgres or sqlite; redis for a Redis layer). The store's answers
// (ErrKeyExists, ErrNotFound, ErrFenced) are not failures, nor is a request
// context cancelled because the client went away.
func (m *Metrics) InstrumentStore(s Store, store string) Store {
	for _, op := range storeOps {
		m.storeErrors.WithLabelValues(store, op)
	}
	return &instrumentedStore{next: s, m: m, store: store}
}

var storeOps = []string{"insert", "get", "take_over", "checkpoint", "complete", "release", "purge", "purge_tombstones",
	"insert_call", "lock_call", "save_call", "count_calls", "claim_due"}

type instrumentedStore struct {
	next  Store
	m     *Metrics
	store string
}

func (s *instrumentedStore) InsertCall(ctx context.Context, c *idempotency.Call) error {
	return s.count("insert_call", s.next.InsertCall(ctx, c))
}

func (s *instrumentedStore) LockCall(ctx context.Context, scope, id string) (*idempotency.Call, error) {
	c, err := s.next.LockCall(ctx, scope, id)
	return c, s.count("lock_call", err)
}

func (s *instrumentedStore) SaveCall(ctx context.Context, c *idempotency.Call) error {
	return s.count("save_call", s.next.SaveCall(ctx, c))
}

func (s *instrumentedStore) CountCalls(ctx context.Context, scope, clientKey, kind string, recordCreatedAt time.Time) (int, error) {
	n, err := s.next.CountCalls(ctx, scope, clientKey, kind, recordCreatedAt)
	return n, s.count("count_calls", err)
}

func (s *instrumentedStore) ClaimDue(ctx context.Context, now, until time.Time, limit, perScope int) ([]idempotency.Call, error) {
	calls, err := s.next.ClaimDue(ctx, now, until, limit, perScope)
	return calls, s.count("claim_due", err)
}

func (s *instrumentedStore) Insert(ctx context.Context, rec *idempotency.Record) error {
	return s.count("insert", s.next.Insert(ctx, rec))
}

func (s *instrumentedStore) Get(ctx context.Context, scope, key string, now time.Time) (*idempotency.Record, error) {
	rec, err := s.next.Get(ctx, scope, key, now)
	return rec, s.count("get", err)
}

func (s *instrumentedStore) TakeOver(ctx context.Context, scope, key string, seen int64, now, lockedUntil time.Time) (*idempotency.Record, error) {
	rec, err := s.next.TakeOver(ctx, scope, key, seen, now, lockedUntil)
	return rec, s.count("take_over", err)
}

func (s *instrumentedStore) Checkpoint(ctx context.Context, scope, key string, fence int64, point string, now time.Time) error {
	return s.count("checkpoint", s.next.Checkpoint(ctx, scope, key, fence, point, now))
}

func (s *instrumentedStore) Complete(ctx context.Context, scope, key string, fence int64, a idempotency.Answer, now time.Time) error {
	return s.count("complete", s.next.Complete(ctx, scope, key, fence, a, now))
}

func (s *instrumentedStore) Release(ctx context.Context, scope, key string, fence int64, now time.Time) error {
	return s.count("release", s.next.Release(ctx, scope, key, fence, now))
}

func (s *instrumentedStore) PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	n, err := s.next.PurgeExpired(ctx, now, limit)
	return n, s.count("purge", err)
}

func (s *instrumentedStore) PurgeTombstones(ctx context.Context, now time.Time, limit int) (int, error) {
	n, err := s.next.PurgeTombstones(ctx, now, limit)
	return n, s.count("purge_tombstones", err)
}

// count records err if it is a failure, and returns it unchanged.
func (s *instrumentedStore) count(op string, err error) error {
	switch {
	case err == nil,
		errors.Is(err, idempotency.ErrKeyExists),
		errors.Is(err, idempotency.ErrNotFound),
		errors.Is(err, idempotency.ErrFenced),
		errors.Is(err, context.Canceled):
	default:
		s.m.storeErrors.WithLabelValues(s.store, op).Inc()
	}
	return err
}
