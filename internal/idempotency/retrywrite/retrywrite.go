// Package retrywrite tries a record write that failed again in the
// background (idempotency.Config.Retry): once the Keeper tries to store an
// answer or give a key back, a database that blinked must not leave the key
// locked until its lock timeout. It is optional: without it, a failed write
// leaves its record to the lock timeout, as a crash would, and the next
// retry after it resumes.
package retrywrite

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemkeys/payments/internal/idempotency"
)

// Writer runs the writes it is given again until each succeeds, is fenced
// out, or runs past its limit; Close waits for them.
type Writer struct {
	min, max, limit time.Duration

	bg   context.Context
	stop context.CancelFunc
	work sync.WaitGroup
}

// New returns a Writer whose pause between two attempts grows from min to
// max, and which gives a write up after limit (the lock timeout: past it,
// a retry takes the record over anyway).
func New(min, max, limit time.Duration) *Writer {
	bg, stop := context.WithCancel(context.Background())
	return &Writer{min: min, max: max, limit: limit, bg: bg, stop: stop}
}

// Retry tries write again in the background with a growing pause, until it
// succeeds, fails with idempotency.ErrFenced (another owner took the record
// over), or the limit runs out. It is the Config.Retry of a Keeper.
func (w *Writer) Retry(write func(ctx context.Context) error) {
	w.work.Add(1)
	go func() {
		defer w.work.Done()
		ctx, cancel := context.WithTimeout(w.bg, w.limit)
		defer cancel()
		for pause := w.min; ; pause = min(pause*2, w.max) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			if err := write(ctx); err == nil || errors.Is(err, idempotency.ErrFenced) {
				return
			}
		}
	}()
}

// Close waits for the writes under way to end, up to ctx, then stops them
// (a write stopped so leaves its record to the lock timeout, as a crash
// would) and returns ctx's error.
func (w *Writer) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		w.work.Wait()
		close(done)
	}()
	defer w.stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		w.stop()
		<-done
		return ctx.Err()
	}
}
