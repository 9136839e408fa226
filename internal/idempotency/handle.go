package idempotency

import (
	"context"
	"errors"
	"time"
)

// flightID is what requests of the same bytes share: only they share a flight.
type flightID struct {
	scope, key string
	sent       [32]byte
}

// result is how a keyed request ends: err, a refusal for the application's
// error table, or answer, the handler's own or a stored one (replayed).
// stored is the completed record it stored or replayed, for the duplicates
// queued behind it.
type result struct {
	outcome  string
	err      error
	answer   *Answer
	replayed bool
	stored   *Record
}

func refused(err error) result { return result{outcome: outcomeOf(err), err: err} }

func fresh(a *Answer, o string, stored *Record) result {
	return result{outcome: o, answer: a, stored: stored}
}

func replayed(rec *Record) result {
	return result{outcome: outcomeReplayed, answer: rec.Answer, replayed: true, stored: rec}
}

// maxRounds bounds the decide-and-act loop of one request, which takes a
// few rounds at most; waiting is bounded by the wait deadline first.
const maxRounds = 64

// Atomic runs one keyed request whose whole effect is rows in the database
// (an order), along the path doc.go tells: h, the application's work, runs
// at most once, with ctx carrying the transaction its record commits with
// (atomic.go); its errors are already answers. It returns the answer to
// send (replayed: a stored one, for ginidem.HeaderReplayed), or a refusal
// for the error table (errors.go, an *http.MaxBytesError, a store's error).
// The Observer hears one outcome per call, a panic of h included.
func (k *Keeper) Atomic(ctx context.Context, in Input, h func(ctx context.Context, body []byte) Answer) (answer Answer, replayed bool, err error) {
	return k.handle(ctx, &run{k: k, ctx: ctx, atomicWork: h}, in)
}

// Guarded runs one keyed request with an effect outside the database (a
// charge) as Atomic does, but the key is reserved first (guarded.go) and h
// runs as op, the owner of the key's record, which it passes to
// Effect.Run; a retry that finds the lock run out takes the record over
// and runs h again from its recovery point.
func (k *Keeper) Guarded(ctx context.Context, in Input, h func(ctx context.Context, op *Op, body []byte) Answer) (answer Answer, replayed bool, err error) {
	return k.handle(ctx, &run{k: k, ctx: ctx, guarded: true, guardedWork: h}, in)
}

func (k *Keeper) handle(ctx context.Context, r *run, in Input) (answer Answer, replayed bool, err error) {
	var res result
	defer func() {
		if p := recover(); p != nil {
			k.obs.Outcome(ctx, in.Route, outcomeError)
			panic(p)
		}
		k.obs.Outcome(ctx, in.Route, res.outcome)
	}()
	req, err := k.request(ctx, in)
	if err != nil {
		res = refused(err)
		return Answer{}, false, err
	}
	r.req = req
	res = r.handle()
	if res.err != nil {
		return Answer{}, false, res.err
	}
	return *res.answer, res.replayed, nil
}

// run is one request on its way through Atomic or Guarded.
type run struct {
	k           *Keeper
	ctx         context.Context
	guarded     bool
	req         keyedRequest
	atomicWork  func(ctx context.Context, body []byte) Answer
	guardedWork func(ctx context.Context, op *Op, body []byte) Answer

	// waitCtx bounds the whole wait for an original, here and in the
	// store, to Config.Wait from waitFrom; made on first use (waitContext).
	waitFrom   time.Time
	waitCtx    context.Context
	cancelWait context.CancelFunc
	askedNew   bool // Config.NewKey has been asked

	// The state of waiting for an original (stepWait).
	polling   bool
	pollStart time.Time
	pause     time.Duration
	wake      <-chan struct{}
	stopWake  func()
}

func (r *run) handle() result {
	k := r.k
	// A completed record in the cache answers without the store: a replay,
	// or a 422.
	if done := r.req.known; done != nil {
		return r.answer(done)
	}
	r.waitFrom = time.Now()
	defer r.endWait()

	// Requests of the same bytes in this process queue behind one leader
	// (internal/flights) and are handed the completed record it leaves; a
	// different request under the same key goes its own way.
	id := flightID{r.req.Scope, r.req.Key, r.req.sent}
	fl, handed, waited, err := k.flights.Acquire(r.waitContext, id)
	if waited {
		k.obs.Waited(r.ctx, r.req.Route, time.Since(r.waitFrom))
	}
	switch {
	case err != nil:
		return refused(ErrInProgress)
	case handed != nil:
		return r.answer(handed)
	}
	var res result
	defer func() { k.flights.Land(id, fl, res.stored) }()

	var rec *Record
	if waited || !r.guarded {
		// Read the key's record before any work: an Atomic handler runs
		// before the insert that would find the key taken, so a retry on
		// an instance that never saw the key would run it for nothing. (A
		// Guarded request's reservation finds a taken key by itself.) And
		// after a flight here, a record most likely exists.
		got, err := k.store.Get(r.ctx, r.req.Scope, r.req.Key, k.now())
		switch {
		case err == nil:
			rec = got
		case errors.Is(err, ErrNotFound):
		case !waited:
			// The read is a shortcut, not what decides (the insert does):
			// without it, the handler still refuses a bad body without a
			// connection, and a good one meets the database's error.
		default:
			res = refused(err)
			return res
		}
	}
	res = r.loop(rec)
	return res
}

// answer is the end of a request whose key holds the completed record rec.
func (r *run) answer(rec *Record) result {
	if err := r.req.fingerprintFor(r.ctx, rec); err != nil {
		return refused(err)
	}
	if decide(rec, r.req.Fingerprint, r.k.now(), r.guarded) == stepMismatch {
		return refused(ErrKeyReused)
	}
	return replayed(rec)
}

// loop carries out decide's steps until one ends the request. Each step
// returns its result and done, or the record to decide on next.
func (r *run) loop(rec *Record) result {
	if err := r.req.fingerprintFor(r.ctx, rec); err != nil {
		return refused(err)
	}
	for range maxRounds {
		var (
			res  result
			done bool
		)
		switch step := decide(rec, r.req.Fingerprint, r.k.now(), r.guarded); step {
		case stepMismatch:
			return refused(ErrKeyReused)
		case stepExpired:
			return refused(ErrKeyExpired)
		case stepReplay:
			r.waitedFor()
			r.k.cfg.Cache.Keep(rec)
			return replayed(rec)
		case stepExecute, stepReserve:
			if ask := r.k.cfg.NewKey; ask != nil && !r.askedNew {
				r.askedNew = true
				found, err := ask(r.ctx, r.req.Scope, r.req.Key, r.k.now())
				if err != nil {
					return refused(err)
				}
				if found != nil {
					rec = found
					continue
				}
			}
			if step == stepExecute {
				rec, res, done = r.atomic()
			} else {
				rec, res, done = r.reserve()
			}
		case stepTakeOver:
			rec, res, done = r.takeOver(rec)
		case stepWait:
			if !r.wait() {
				r.waitedFor()
				return refused(ErrInProgress)
			}
			rec, res, done = r.reread()
		}
		if done {
			return res
		}
	}
	return refused(ErrInProgress)
}

// reread reads the key's record again after a wait or a lost race. One that
// is gone was given back: a Guarded request may reserve the key; an Atomic
// one cannot tell what happened and answers in progress.
func (r *run) reread() (*Record, result, bool) {
	rec, err := r.k.store.Get(r.ctx, r.req.Scope, r.req.Key, r.k.now())
	switch {
	case errors.Is(err, ErrNotFound) && r.guarded:
		return nil, result{}, false
	case errors.Is(err, ErrNotFound):
		return nil, refused(ErrInProgress), true
	case err != nil:
		return nil, refused(err), true
	}
	return rec, result{}, false
}

// wait pauses, holding no connection, until the record may have changed: a
// growing pause, or the cache's wake-up when the original ends anywhere.
// It reports false when the wait deadline ran out first.
func (r *run) wait() bool {
	t := r.k.cfg
	if !r.polling {
		r.polling, r.pollStart, r.pause = true, time.Now(), t.PollMin
		// Only a request that waits subscribes; polling stays as the
		// fallback.
		r.wake, r.stopWake = t.Cache.Subscribe(r.req.Scope, r.req.Key)
	}
	timer := time.NewTimer(r.pause)
	defer timer.Stop()
	select {
	case <-timer.C:
		r.pause = min(r.pause*2, t.PollMax)
	case <-r.wake:
	case <-r.waitContext().Done():
		return false
	}
	return true
}

// waitedFor tells the Observer how long the request polled, if it did.
func (r *run) waitedFor() {
	if r.polling {
		r.k.obs.Waited(r.ctx, r.req.Route, time.Since(r.pollStart))
	}
}

// waitContext is the request's waitCtx, made on first use.
func (r *run) waitContext() context.Context {
	if r.waitCtx == nil {
		r.waitCtx, r.cancelWait = context.WithDeadline(r.ctx, r.waitFrom.Add(r.k.cfg.Wait))
	}
	return r.waitCtx
}

// endWait releases what waiting took, if it was taken: waitCtx's timer,
// the cache's wake-up.
func (r *run) endWait() {
	if r.cancelWait != nil {
		r.cancelWait()
	}
	if r.stopWake != nil {
		r.stopWake()
	}
}

// completed is the record of an Atomic request's final answer.
func (r *run) completed(a Answer) *Record {
	now := r.k.now()
	stored := r.k.cfg.stored(a)
	return &Record{
		Scope: r.req.Scope, Key: r.req.Key, Method: r.req.Method, Path: r.req.Path,
		Fingerprint: r.req.Fingerprint, State: StateCompleted, Point: PointStarted,
		LockedUntil: now, Answer: &stored, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(r.k.cfg.TTL),
		Sent: r.req.sent,
	}
}
