package explore

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

// Store is an idempotency.Store, janitor.Store and Transactor in memory,
// with SQLite's semantics: one writer at a time (a transaction holds the
// write lock from its begin to its end, and a write outside a transaction
// waits for it), readers that see the last commit and never wait. It also
// keeps the application's rows (Rows), which join its transactions as the
// application's own tables join the database's. It passes the storetest
// contract (store_test.go), so the explorer runs the core against the
// semantics the product's stores have.
//
// With a Hook, every statement outside a transaction and every begin first
// asks the hook, which is how the explorer's scheduler gets to choose who
// moves next. Statements inside a transaction do not ask: nobody else can
// see them before the commit, and nobody else can write meanwhile, so where
// another actor's move falls between a transaction's begin and its end
// changes nothing.
type Store struct {
	// Hook, if set, is asked before every statement outside a transaction
	// (write says whether it needs the write lock) and before every begin
	// (write true); End is told when a transaction ends. An error from Step
	// is the statement's error: nothing ran.
	Hook Hook

	wmu sync.Mutex // the write lock
	mu  sync.RWMutex
	db  *tables // the last commit
}

// Hook is what the explorer's scheduler hears from a Store.
type Hook interface {
	Step(ctx context.Context, label string, write bool) error
	Begin(ctx context.Context) error
	End(ctx context.Context)
}

var (
	_ idempotency.Store      = (*Store)(nil)
	_ idempotency.Transactor = (*Store)(nil)
)

// NewStore returns an empty store.
func NewStore() *Store { return &Store{db: newTables()} }

type rkey struct{ scope, key string }

type ckey struct{ scope, id string }

// tables is the whole database: the core's two tables, the application's
// rows by table, and what the explorer notes beside them (lifetimes), which
// the core never reads.
type tables struct {
	records map[rkey]idempotency.Record
	calls   map[ckey]idempotency.Call
	rows    map[string]map[ckey]any
	// lifetime counts the records each key has had: a record inserted into
	// a free or expired key starts lifetime n+1. callLife is the lifetime
	// of the client's key when each call was inserted (0 for a call without
	// a client key). Both roll back with their transaction.
	lifetime map[rkey]int
	callLife map[ckey]int
}

func newTables() *tables {
	return &tables{
		records: map[rkey]idempotency.Record{}, calls: map[ckey]idempotency.Call{}, rows: map[string]map[ckey]any{},
		lifetime: map[rkey]int{}, callLife: map[ckey]int{},
	}
}

// clone copies t for a transaction. The values are copied by value; a
// record's answer is never written in place, only replaced.
func (t *tables) clone() *tables {
	c := &tables{
		records: maps.Clone(t.records), calls: maps.Clone(t.calls), rows: make(map[string]map[ckey]any, len(t.rows)),
		lifetime: maps.Clone(t.lifetime), callLife: maps.Clone(t.callLife),
	}
	for name, rows := range t.rows {
		c.rows[name] = maps.Clone(rows)
	}
	return c
}

// txn is a transaction carried by a context: a copy of the tables that
// replaces them at the commit.
type txn struct {
	t     *tables
	after []func()
}

type txKey struct{}

func txOf(ctx context.Context) *txn {
	tx, _ := ctx.Value(txKey{}).(*txn)
	return tx
}

// read runs fn over the tables a statement of ctx sees: its transaction's,
// or the last commit.
func (s *Store) read(ctx context.Context, label string, fn func(t *tables) error) error {
	if tx := txOf(ctx); tx != nil {
		return fn(tx.t)
	}
	if err := s.step(ctx, label, false); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return fn(s.db)
}

// write runs fn over the tables of ctx's transaction, or, outside one, as
// a statement of its own under the write lock; fn's error undoes nothing
// (each of fn's writes is its last step).
func (s *Store) write(ctx context.Context, label string, fn func(t *tables) error) error {
	if tx := txOf(ctx); tx != nil {
		return fn(tx.t)
	}
	if err := s.step(ctx, label, true); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return fn(s.db)
}

func (s *Store) step(ctx context.Context, label string, write bool) error {
	if s.Hook == nil {
		return nil
	}
	return s.Hook.Step(ctx, label, write)
}

// InTx implements idempotency.Transactor: fn runs on a copy of the tables
// that replaces them when fn returns nil; a panic rolls back and goes on up.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if txOf(ctx) != nil {
		return fn(ctx)
	}
	if s.Hook != nil {
		if err := s.Hook.Begin(ctx); err != nil {
			return err
		}
	}
	s.wmu.Lock()
	s.mu.RLock()
	tx := &txn{t: s.db.clone()}
	s.mu.RUnlock()
	committed := false
	defer func() {
		s.wmu.Unlock()
		if s.Hook != nil {
			s.Hook.End(ctx)
		}
		if committed {
			for _, fn := range tx.after {
				fn()
			}
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{}, tx)); err != nil {
		return err
	}
	s.mu.Lock()
	s.db = tx.t
	s.mu.Unlock()
	committed = true
	return nil
}

// AfterCommit implements idempotency.Transactor.
func (s *Store) AfterCommit(ctx context.Context, fn func()) {
	if tx := txOf(ctx); tx != nil {
		tx.after = append(tx.after, fn)
		return
	}
	fn()
}

// Insert implements idempotency.Store.
func (s *Store) Insert(ctx context.Context, rec *idempotency.Record) error {
	return s.write(ctx, "insert record "+rec.Key, func(t *tables) error {
		k := rkey{rec.Scope, rec.Key}
		fence := idempotency.FirstFence(rec.CreatedAt)
		if old, ok := t.records[k]; ok {
			if old.ExpiresAt.After(rec.CreatedAt) {
				return idempotency.ErrKeyExists
			}
			fence = max(fence, old.Fence+1)
		}
		rec.Fence = fence
		stored := *rec
		stored.Answer = copyAnswer(rec.Answer)
		stored.LockedUntil, stored.CreatedAt, stored.UpdatedAt, stored.ExpiresAt =
			stored.LockedUntil.UTC(), stored.CreatedAt.UTC(), stored.UpdatedAt.UTC(), stored.ExpiresAt.UTC()
		t.records[k] = stored
		t.lifetime[k]++
		return nil
	})
}

// Get implements idempotency.Store.
func (s *Store) Get(ctx context.Context, scope, key string, now time.Time) (*idempotency.Record, error) {
	var rec idempotency.Record
	err := s.read(ctx, "get record "+key, func(t *tables) error {
		r, ok := t.records[rkey{scope, key}]
		if !ok || !r.ExpiresAt.After(now) {
			return idempotency.ErrNotFound
		}
		rec = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	rec.Answer = copyAnswer(rec.Answer)
	return &rec, nil
}

// TakeOver implements idempotency.Store.
func (s *Store) TakeOver(ctx context.Context, scope, key string, seen int64, now, lockedUntil time.Time) (*idempotency.Record, error) {
	var taken idempotency.Record
	err := s.write(ctx, "take over "+key, func(t *tables) error {
		k := rkey{scope, key}
		r, ok := t.records[k]
		if !ok || r.Fence != seen || r.State != idempotency.StateExecuting || r.LockedUntil.After(now) || !r.ExpiresAt.After(now) {
			return idempotency.ErrFenced
		}
		r.Fence++
		r.LockedUntil, r.UpdatedAt = lockedUntil.UTC(), now.UTC()
		t.records[k] = r
		taken = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &taken, nil
}

// owned runs fn on the executing record of key held at fence, or returns
// ErrFenced.
func (s *Store) owned(ctx context.Context, label, scope, key string, fence int64, fn func(t *tables, r *idempotency.Record)) error {
	return s.write(ctx, label+" "+key, func(t *tables) error {
		k := rkey{scope, key}
		r, ok := t.records[k]
		if !ok || r.Fence != fence || r.State != idempotency.StateExecuting {
			return idempotency.ErrFenced
		}
		fn(t, &r)
		if _, kept := t.records[k]; kept {
			t.records[k] = r
		}
		return nil
	})
}

// Checkpoint implements idempotency.Store.
func (s *Store) Checkpoint(ctx context.Context, scope, key string, fence int64, point string, now time.Time) error {
	return s.owned(ctx, "checkpoint "+point, scope, key, fence, func(_ *tables, r *idempotency.Record) {
		r.Point, r.UpdatedAt = point, now.UTC()
	})
}

// Complete implements idempotency.Store.
func (s *Store) Complete(ctx context.Context, scope, key string, fence int64, a idempotency.Answer, now time.Time) error {
	return s.owned(ctx, "complete", scope, key, fence, func(_ *tables, r *idempotency.Record) {
		r.State, r.LockedUntil, r.UpdatedAt = idempotency.StateCompleted, now.UTC(), now.UTC()
		r.Answer = copyAnswer(&a)
	})
}

// Release implements idempotency.Store.
func (s *Store) Release(ctx context.Context, scope, key string, fence int64, now time.Time) error {
	return s.owned(ctx, "release", scope, key, fence, func(t *tables, r *idempotency.Record) {
		if r.Point == idempotency.PointStarted {
			delete(t.records, rkey{scope, key})
			return
		}
		r.LockedUntil, r.UpdatedAt = now.UTC(), now.UTC()
	})
}

// PurgeExpired implements janitor.Store: the longest expired first.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	n := 0
	err := s.write(ctx, "purge", func(t *tables) error {
		var expired []idempotency.Record
		for _, r := range t.records {
			if !r.ExpiresAt.After(now) {
				expired = append(expired, r)
			}
		}
		slices.SortFunc(expired, func(a, b idempotency.Record) int {
			return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Key, b.Key))
		})
		for _, r := range expired[:min(limit, len(expired))] {
			delete(t.records, rkey{r.Scope, r.Key})
			n++
		}
		return nil
	})
	return n, err
}

// PurgeTombstones implements janitor.Store: there are none.
func (s *Store) PurgeTombstones(context.Context, time.Time, int) (int, error) { return 0, nil }

// InsertCall implements idempotency.Store.
func (s *Store) InsertCall(ctx context.Context, c *idempotency.Call) error {
	return s.write(ctx, "insert call "+c.ID, func(t *tables) error {
		k := ckey{c.Scope, c.ID}
		if _, ok := t.calls[k]; ok {
			return idempotency.ErrKeyExists
		}
		t.calls[k] = utcCall(*c)
		if c.ClientKey != "" {
			t.callLife[k] = t.lifetime[rkey{c.Scope, c.ClientKey}]
		}
		return nil
	})
}

// LockCall implements idempotency.Store; a transaction holds the write
// lock already.
func (s *Store) LockCall(ctx context.Context, scope, id string) (*idempotency.Call, error) {
	var c idempotency.Call
	err := s.read(ctx, "read call "+id, func(t *tables) error {
		got, ok := t.calls[ckey{scope, id}]
		if !ok {
			return idempotency.ErrNotFound
		}
		c = got
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// SaveCall implements idempotency.Store: only what moves of a call.
func (s *Store) SaveCall(ctx context.Context, c *idempotency.Call) error {
	return s.write(ctx, "save call "+c.ID, func(t *tables) error {
		k := ckey{c.Scope, c.ID}
		old, ok := t.calls[k]
		if !ok {
			return idempotency.ErrNotFound
		}
		old.State, old.IntentFence, old.IntentAt, old.AttemptedAt = c.State, c.IntentFence, c.IntentAt, c.AttemptedAt
		old.DueAt, old.Checks, old.UpdatedAt = c.DueAt, c.Checks, c.UpdatedAt
		t.calls[k] = utcCall(old)
		return nil
	})
}

// CountCalls implements idempotency.Store.
func (s *Store) CountCalls(ctx context.Context, scope, clientKey, kind string, recordCreatedAt time.Time) (int, error) {
	n := 0
	err := s.read(ctx, "count calls "+clientKey, func(t *tables) error {
		for _, c := range t.calls {
			if c.Scope == scope && c.ClientKey == clientKey && c.Kind == kind &&
				(c.RecordCreatedAt.IsZero() || c.RecordCreatedAt.Before(recordCreatedAt)) {
				n++
			}
		}
		return nil
	})
	return n, err
}

// ClaimDue implements idempotency.Store; a transaction holds the write lock
// already, so nothing is held by another when this runs.
func (s *Store) ClaimDue(ctx context.Context, now, until time.Time, limit, perScope int) ([]idempotency.Call, error) {
	var out []idempotency.Call
	err := s.write(ctx, "claim due calls", func(t *tables) error {
		var due []idempotency.Call
		for _, c := range t.calls {
			if !c.DueAt.IsZero() && !c.DueAt.After(now) {
				due = append(due, c)
			}
		}
		slices.SortFunc(due, func(a, b idempotency.Call) int {
			return cmp.Or(a.DueAt.Compare(b.DueAt), cmp.Compare(a.ID, b.ID))
		})
		taken := map[string]int{}
		for _, c := range due {
			if len(out) == limit {
				break
			}
			if taken[c.Scope] < perScope {
				taken[c.Scope]++
				c.DueAt = until.UTC()
				t.calls[ckey{c.Scope, c.ID}] = c
				out = append(out, c)
			}
		}
		return nil
	})
	return out, err
}

// Lifetime is the number of records the key has had (its current record's
// lifetime, counting from 1), and LifetimeOfCall the lifetime of its client
// key under which a call was made (0: none). The core never asks: they are
// the explorer's notes for its invariants.
func (s *Store) Lifetime(scope, key string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.db.lifetime[rkey{scope, key}]
}

// LifetimeOfCall: see Lifetime.
func (s *Store) LifetimeOfCall(scope, id string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.db.callLife[ckey{scope, id}]
}

// Records returns every record as last committed, by scope and key.
func (s *Store) Records() []idempotency.Record {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := slices.Collect(maps.Values(s.db.records))
	slices.SortFunc(out, func(a, b idempotency.Record) int {
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// Calls returns every call as last committed, by scope and id.
func (s *Store) Calls() []idempotency.Call {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := slices.Collect(maps.Values(s.db.calls))
	slices.SortFunc(out, func(a, b idempotency.Call) int {
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// Rows is one table of the application's rows of type T, by scope and id,
// in a Store: its statements join the store's transactions, and outside
// one they are statements of their own, as the application's own tables'
// are in the database.
type Rows[T any] struct {
	s    *Store
	name string
}

// NewRows returns the table name of s.
func NewRows[T any](s *Store, name string) *Rows[T] { return &Rows[T]{s: s, name: name} }

// Get returns the row. It returns idempotency.ErrNotFound.
func (r *Rows[T]) Get(ctx context.Context, scope, id string) (T, error) {
	var v T
	err := r.s.read(ctx, "read "+r.name+" "+id, func(t *tables) error {
		got, ok := t.rows[r.name][ckey{scope, id}]
		if !ok {
			return idempotency.ErrNotFound
		}
		v = got.(T)
		return nil
	})
	return v, err
}

// Insert adds a row. It returns idempotency.ErrKeyExists.
func (r *Rows[T]) Insert(ctx context.Context, scope, id string, v T) error {
	return r.s.write(ctx, "insert "+r.name+" "+id, func(t *tables) error {
		rows := t.rows[r.name]
		if rows == nil {
			rows = map[ckey]any{}
			t.rows[r.name] = rows
		}
		if _, ok := rows[ckey{scope, id}]; ok {
			return idempotency.ErrKeyExists
		}
		rows[ckey{scope, id}] = v
		return nil
	})
}

// Update replaces a row. It returns idempotency.ErrNotFound.
func (r *Rows[T]) Update(ctx context.Context, scope, id string, v T) error {
	return r.s.write(ctx, "update "+r.name+" "+id, func(t *tables) error {
		if _, ok := t.rows[r.name][ckey{scope, id}]; !ok {
			return idempotency.ErrNotFound
		}
		t.rows[r.name][ckey{scope, id}] = v
		return nil
	})
}

// Where returns the rows for which keep is true, in the tables ctx sees,
// by scope and id: a query of the application's.
func (r *Rows[T]) Where(ctx context.Context, keep func(T) bool) ([]T, error) {
	var out []T
	err := r.s.read(ctx, "query "+r.name, func(t *tables) error {
		out = selectRows(t.rows[r.name], keep)
		return nil
	})
	return out, err
}

// All returns every row as last committed, by scope and id, without a
// statement: what the invariants read.
func (r *Rows[T]) All() []T {
	r.s.mu.RLock()
	defer r.s.mu.RUnlock()
	return selectRows(r.s.db.rows[r.name], func(T) bool { return true })
}

func selectRows[T any](rows map[ckey]any, keep func(T) bool) []T {
	keys := slices.SortedFunc(maps.Keys(rows), func(a, b ckey) int {
		return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.id, b.id))
	})
	var out []T
	for _, k := range keys {
		if v := rows[k].(T); keep(v) {
			out = append(out, v)
		}
	}
	return out
}

func copyAnswer(a *idempotency.Answer) *idempotency.Answer {
	if a == nil {
		return nil
	}
	c := *a
	c.Header = a.Header.Clone()
	if c.Header == nil {
		c.Header = http.Header{}
	}
	c.Body = slices.Clone(a.Body)
	if c.Body == nil {
		c.Body = []byte{}
	}
	c.Final = true
	return &c
}

func utcCall(c idempotency.Call) idempotency.Call {
	utc := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Time{}
		}
		return t.UTC()
	}
	c.IntentAt, c.AttemptedAt, c.DueAt, c.CreatedAt, c.UpdatedAt = utc(c.IntentAt), utc(c.AttemptedAt), utc(c.DueAt), utc(c.CreatedAt), utc(c.UpdatedAt)
	c.RecordCreatedAt = utc(c.RecordCreatedAt)
	return c
}
