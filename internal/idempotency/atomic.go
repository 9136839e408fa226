package idempotency

import (
	"context"
	"errors"
	"time"
)

// The Atomic step (stepExecute). The handler runs inside the Transactor's
// transaction, which begins at its first statement (decoding and
// validating hold no connection). Then the answer decides:
//
//   - final and a success: the completed record is inserted in the same
//     transaction, so the business rows and the record commit together or
//     not at all; a live record under the key fails the insert
//     (ErrKeyExists), the transaction rolls back and that record answers.
//   - final but an error: an error has no effect, so the transaction rolls
//     back and the record is inserted by itself (also right on PostgreSQL,
//     where a failed statement aborts the transaction).
//   - not final: the transaction rolls back; a live record under the key
//     answers if there is one, else the handler's answer does.
//
// The contract for an Atomic handler: no effect outside the transaction;
// a statement that fails is answered with an error, never with a success.

var (
	// errNotKept rolls back a transaction whose answer is not final.
	errNotKept = errors.New("answer not kept")
	// errKeptAlone rolls back a transaction whose answer is a final error,
	// whose record is inserted after the rollback.
	errKeptAlone = errors.New("error answer kept without its transaction")
)

func (r *run) atomic() (*Record, result, bool) {
	k := r.k
	var tx atomicTx
	tx.r = r
	err := k.cfg.Transactor.InTx(r.ctx, tx.run)
	if errors.Is(err, errKeptAlone) {
		tx.stored = r.completed(tx.answer)
		err = k.store.Insert(r.ctx, tx.stored)
	}
	answer, stored := &tx.answer, tx.stored
	switch {
	case err == nil:
		k.published(stored)
		return nil, fresh(answer, outcomeExecuted, stored), true
	case errors.Is(err, errNotKept):
		if rec, gerr := k.store.Get(r.ctx, r.req.Scope, r.req.Key, k.now()); gerr == nil {
			return rec, result{}, false
		}
		return nil, fresh(answer, outcomeExecuted, nil), true
	case errors.Is(err, ErrKeyExists):
		return r.reread() // our work rolled back: the key's holder answers
	}
	return nil, refused(err), true
}

// atomicTx is what runs in an Atomic request's transaction: the handler,
// then the record of its answer when it is kept with it.
type atomicTx struct {
	r      *run
	answer Answer
	stored *Record
}

func (t *atomicTx) run(ctx context.Context) error {
	r, k := t.r, t.r.k
	started := time.Now()
	t.answer = r.atomicWork(ctx, r.req.Body)
	k.obs.Processed(r.ctx, r.req.Route, time.Since(started))
	switch {
	case !t.answer.Final:
		return errNotKept
	case !t.answer.success():
		return errKeptAlone
	}
	t.stored = r.completed(t.answer)
	return k.store.Insert(ctx, t.stored)
}
