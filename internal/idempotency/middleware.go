package idempotency

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/database"
)

// HeaderKey is the request header that carries the client's key, and
// HeaderReplayed the response header that marks a replayed answer.
const (
	HeaderKey      = "Idempotency-Key"
	HeaderReplayed = "Idempotent-Replayed"
)

// request is what the middleware knows of one keyed request.
type request struct {
	merchantID  string
	key         string
	method      string
	path        string
	fingerprint string
}

// Atomic is the middleware for operations that only touch the database,
// such as creating an order. The handler runs inside a transaction carried by
// the request context (the service's store joins it), and when its answer is
// one to keep, the record is inserted already complete in that same
// transaction: the business rows and the record commit together or not at
// all. A live record under the key makes the insert a no-op, the transaction
// rolls back, and the request is answered from the record instead.
func (k *Keeper) Atomic() gin.HandlerFunc {
	return func(c *gin.Context) { k.serve(c, true) }
}

// Guarded is the middleware for operations with an effect outside the
// database, such as a charge at the payment provider. The key is reserved
// first (an executing record with a fencing token); the handler then runs
// with a Lease in its context to record recovery points, and the final answer
// is stored when it is one to keep. A retry after a crash or after an answer
// that is not kept resumes from the last recovery point.
func (k *Keeper) Guarded() gin.HandlerFunc {
	return func(c *gin.Context) { k.serve(c, false) }
}

func (k *Keeper) serve(c *gin.Context, atomic bool) {
	req, err := k.parse(c)
	if err != nil {
		k.fail(c, err)
		return
	}
	// A completed record in the cache answers without the database: a
	// replay, or the 422 of a different request. Neither waits, so this
	// path needs no wait deadline.
	if rec := k.cacheGet(c.Request.Context(), req); rec != nil {
		k.resolve(c, req, rec, atomic, c.Request.Context())
		return
	}

	// The whole wait for an original, in this process and in the database,
	// is bounded by one deadline.
	waitCtx, cancel := context.WithTimeout(c.Request.Context(), k.cfg.Wait)
	defer cancel()

	// Only identical requests share a flight: a different request under
	// the same key goes straight to the database and its 422.
	id := req.merchantID + "\x00" + req.key + "\x00" + req.fingerprint
	waitStart := time.Now()
	fl, handed, waited, err := k.flights.acquire(waitCtx, id)
	if waited {
		k.obs.Waited(c.FullPath(), time.Since(waitStart))
	}
	switch {
	case err != nil:
		k.fail(c, &InProgressError{RetryAfter: time.Second})
		return
	case handed != nil:
		k.resolve(c, req, handed, atomic, waitCtx)
		return
	}
	var landed *Record
	defer func() { k.flights.land(id, fl, landed) }()

	if waited || k.cfg.Limiter != nil {
		// Another request with this key just ran here, so a record most
		// likely exists; or new keys are rate-limited, and only a key with
		// no record is new. Read the record before doing any work.
		rec, err := k.store.Get(c.Request.Context(), req.merchantID, req.key, k.clock.Now())
		switch {
		case err == nil:
			landed = k.resolve(c, req, rec, atomic, waitCtx)
			return
		case !errors.Is(err, ErrNotFound):
			k.fail(c, err)
			return
		}
	}
	if k.cfg.Limiter != nil {
		if retryAfter, ok := k.cfg.Limiter.AllowNewKey(c.Request.Context(), req.merchantID); !ok {
			k.fail(c, &RateLimitedError{RetryAfter: retryAfter})
			return
		}
	}
	if atomic {
		landed = k.runAtomic(c, req, waitCtx)
	} else {
		landed = k.reserve(c, req, waitCtx)
	}
}

// parse validates the key and computes the fingerprint. The body is read
// once and put back for the handler.
func (k *Keeper) parse(c *gin.Context) (request, error) {
	values := c.Request.Header.Values(HeaderKey)
	switch {
	case len(values) == 0:
		return request{}, ErrKeyMissing
	case len(values) > 1:
		return request{}, errors.Join(ErrKeyInvalid, errors.New("the header is repeated"))
	}
	key := values[0]
	if err := ValidateKey(key); err != nil {
		return request{}, err
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return request{}, err
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	canonical, err := Canonicalize(body)
	if err != nil {
		return request{}, err
	}
	params := make([]Param, len(c.Params))
	for i, p := range c.Params {
		params[i] = Param{Name: p.Key, Value: p.Value}
	}
	return request{
		merchantID:  k.merchant(c),
		key:         key,
		method:      c.Request.Method,
		path:        c.Request.URL.Path,
		fingerprint: Fingerprint(c.Request.Method, c.FullPath(), params, canonical),
	}, nil
}

// errNotKept rolls back an Atomic transaction whose answer is not stored.
var errNotKept = errors.New("answer not kept")

func (k *Keeper) runAtomic(c *gin.Context, req request, waitCtx context.Context) *Record {
	baseCtx := c.Request.Context()
	cw := newCaptureWriter(c.Writer)
	c.Writer = cw
	// On a panic the transaction rolls back (GORM re-panics); the recovery
	// middleware further out must then write to the real writer.
	defer func() {
		c.Writer = cw.ResponseWriter
		c.Request = c.Request.WithContext(baseCtx)
	}()
	var stored *Record
	err := k.db.WithContext(baseCtx).Transaction(func(tx *gorm.DB) error {
		txCtx := database.WithTx(baseCtx, tx)
		c.Request = c.Request.WithContext(txCtx)
		started := time.Now()
		c.Next()
		k.obs.Processed(c.FullPath(), time.Since(started))
		resp := cw.response()
		if !Kept(resp.Status) {
			return errNotKept
		}
		now := k.clock.Now()
		rec := &Record{
			MerchantID: req.merchantID, Key: req.key, Method: req.method, Path: req.path,
			Fingerprint: req.fingerprint, State: StateCompleted, RecoveryPoint: PointStarted,
			LockedUntil: now, Response: &resp, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(k.cfg.TTL),
		}
		if err := k.store.Insert(txCtx, rec); err != nil {
			return err
		}
		stored = rec
		return nil
	})
	c.Writer = cw.ResponseWriter
	c.Request = c.Request.WithContext(baseCtx)

	switch {
	case err == nil:
		k.obs.Outcome(c.FullPath(), OutcomeExecuted)
		cw.flush()
		k.published(baseCtx, stored)
		return stored
	case errors.Is(err, errNotKept):
		// An answer that is not kept may still be a retry's view of a
		// finished operation: adding an item under If-Match is refused
		// once the first attempt has moved the version. If the key holds a
		// record, that record answers (a replay, or a 422), not the
		// handler's second opinion.
		if rec, gerr := k.store.Get(baseCtx, req.merchantID, req.key, k.clock.Now()); gerr == nil {
			return k.resolve(c, req, rec, true, waitCtx)
		}
		k.obs.Outcome(c.FullPath(), OutcomeExecuted)
		cw.flush()
		return nil
	case errors.Is(err, ErrKeyExists):
		// Someone else holds the key; our work is rolled back. Answer
		// from their record.
		rec, err := k.store.Get(baseCtx, req.merchantID, req.key, k.clock.Now())
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				// It expired or was released between our insert and this
				// read: nothing was done, and a retry will run afresh.
				err = &InProgressError{RetryAfter: time.Second}
			}
			k.fail(c, err)
			return nil
		}
		return k.resolve(c, req, rec, true, waitCtx)
	default:
		k.fail(c, database.Classify(err))
		return nil
	}
}

// reserve inserts the executing record of a Guarded request and runs it.
func (k *Keeper) reserve(c *gin.Context, req request, waitCtx context.Context) *Record {
	// A client that hangs up during the insert must not leave us unsure
	// whether we own the key: the row may be written while the request's
	// context reports cancelled, and nobody would release it. Writes of
	// the record therefore finish regardless of the client.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 10*time.Second)
	defer cancel()
	now := k.clock.Now()
	rec := &Record{
		MerchantID: req.merchantID, Key: req.key, Method: req.method, Path: req.path,
		Fingerprint: req.fingerprint, State: StateExecuting, RecoveryPoint: PointStarted,
		LockedUntil: now.Add(k.cfg.LockTimeout), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(k.cfg.TTL),
	}
	err := k.store.Insert(ctx, rec)
	switch {
	case err == nil:
		return k.execute(c, req, rec.Fence, PointStarted, rec.ExpiresAt, OutcomeExecuted)
	case errors.Is(err, ErrKeyExists):
		existing, err := k.store.Get(ctx, req.merchantID, req.key, k.clock.Now())
		if errors.Is(err, ErrNotFound) {
			// Released or expired since our insert: try once more.
			return k.reserve(c, req, waitCtx)
		}
		if err != nil {
			k.fail(c, err)
			return nil
		}
		return k.resolve(c, req, existing, false, waitCtx)
	default:
		k.fail(c, err)
		return nil
	}
}

// execute runs the handler as the owner of the record (fence) and then keeps
// or releases the answer.
func (k *Keeper) execute(c *gin.Context, req request, fence int64, point string, expiresAt time.Time, outcome Outcome) *Record {
	baseCtx := c.Request.Context()
	lease := &Lease{store: k.store, clock: k.clock, merchantID: req.merchantID, key: req.key, fence: fence, point: point}
	cw := newCaptureWriter(c.Writer)
	c.Writer = cw
	c.Request = c.Request.WithContext(context.WithValue(baseCtx, leaseKey{}, lease))
	defer func() {
		if p := recover(); p != nil {
			// A panicking handler is answered by the recovery middleware
			// further out: give it the real writer, and give the key back
			// as after any answer that is not kept. Durable steps commit
			// with their recovery point, so the record says truly how far
			// the operation got.
			c.Writer = cw.ResponseWriter
			c.Request = c.Request.WithContext(baseCtx)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(baseCtx), 5*time.Second)
			defer cancel()
			_ = k.store.Release(ctx, req.merchantID, req.key, fence, k.clock.Now())
			panic(p)
		}
	}()
	started := time.Now()
	c.Next()
	k.obs.Processed(c.FullPath(), time.Since(started))
	k.obs.Outcome(c.FullPath(), outcome)
	c.Writer = cw.ResponseWriter
	c.Request = c.Request.WithContext(baseCtx)

	resp := cw.response()
	// The answer is stored even if the client has gone: use a context that
	// the client's disconnect does not cancel.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(baseCtx), 5*time.Second)
	defer cancel()
	now := k.clock.Now()
	if !Kept(resp.Status) {
		if err := k.store.Release(ctx, req.merchantID, req.key, fence, now); err != nil && !errors.Is(err, ErrFenced) {
			// Most likely the database is away (this answer may well be its
			// 503). Keep trying in the background, so the key is free as
			// soon as the database is back rather than when the lock
			// times out; the write is fenced, so a late one is harmless.
			k.log.WarnContext(ctx, "idempotency: release failed; retrying in the background", "error", err)
			k.retryLater(func(ctx context.Context) error {
				return k.store.Release(ctx, req.merchantID, req.key, fence, k.clock.Now())
			})
		}
		cw.flush()
		k.released(ctx, req.merchantID, req.key)
		return nil
	}
	err := k.store.Complete(ctx, req.merchantID, req.key, fence, resp, now)
	switch {
	case errors.Is(err, ErrFenced):
		// Another request took the record over while this one ran (our lock
		// had timed out). Its answer is the one that will be kept; send the
		// client to fetch it.
		k.fail(c, &InProgressError{RetryAfter: time.Second})
		return nil
	case err != nil:
		// The effect happened and the answer is true, but it could not be
		// stored. Keep trying in the background (fenced, so harmless if a
		// retry took over meanwhile); failing that, the record stays at
		// its last recovery point and a retry after the lock timeout
		// resumes there and stores the answer.
		k.log.WarnContext(ctx, "idempotency: storing the response failed; retrying in the background", "error", err)
		k.retryLater(func(ctx context.Context) error {
			return k.store.Complete(ctx, req.merchantID, req.key, fence, resp, k.clock.Now())
		})
		cw.flush()
		return nil
	}
	cw.flush()
	done := &Record{
		MerchantID: req.merchantID, Key: req.key, Method: req.method, Path: req.path,
		Fingerprint: req.fingerprint, State: StateCompleted, Fence: fence, Response: &resp,
		ExpiresAt: expiresAt,
	}
	k.published(ctx, done)
	return done
}

// resolve answers a request whose key is already held by rec: a mismatch, a
// replay, a wait for the original, or the takeover of an abandoned record.
func (k *Keeper) resolve(c *gin.Context, req request, rec *Record, atomic bool, waitCtx context.Context) *Record {
	ctx := c.Request.Context()
	backoff := 5 * time.Millisecond
	pollStart, polled := time.Now(), false
	var wake <-chan struct{}
	subscribed := false
	for {
		if rec.Fingerprint != req.fingerprint {
			k.fail(c, ErrKeyReused)
			return nil
		}
		if rec.State == StateCompleted && rec.Response != nil {
			if polled {
				k.obs.Waited(c.FullPath(), time.Since(pollStart))
			}
			k.obs.Outcome(c.FullPath(), OutcomeReplayed)
			replay(c, rec.Response)
			return rec
		}
		now := k.clock.Now()
		if !atomic && !rec.LockedUntil.After(now) {
			// As in reserve: once we try to own the record, finish the
			// write whatever the client does.
			err := k.store.TakeOver(context.WithoutCancel(ctx), req.merchantID, req.key, rec.Fence, now, now.Add(k.cfg.LockTimeout))
			if err == nil {
				return k.execute(c, req, rec.Fence+1, rec.RecoveryPoint, rec.ExpiresAt, OutcomeRecovered)
			}
			if !errors.Is(err, ErrFenced) {
				k.fail(c, err)
				return nil
			}
		} else {
			// The original still runs, here or on another instance. Poll
			// the record with a growing pause, holding no connection
			// between reads.
			if k.cache != nil && !subscribed {
				// Woken by the original's completion on any instance; the
				// polling stays as the fallback when the cache cannot
				// deliver. Only a request that waits subscribes: a replay
				// has nothing to wait for.
				ch, stop := k.cache.Subscribe(req.merchantID, req.key)
				defer stop()
				wake, subscribed = ch, true
			}
			polled = true
			select {
			case <-time.After(backoff):
				backoff = min(backoff*2, 200*time.Millisecond)
			case <-wake:
			case <-waitCtx.Done():
				k.obs.Waited(c.FullPath(), time.Since(pollStart))
				k.fail(c, &InProgressError{RetryAfter: time.Second})
				return nil
			}
		}
		next, err := k.store.Get(ctx, req.merchantID, req.key, k.clock.Now())
		switch {
		case errors.Is(err, ErrNotFound) && !atomic:
			// The original gave the key back: this request may run it.
			return k.reserve(c, req, waitCtx)
		case errors.Is(err, ErrNotFound):
			k.fail(c, &InProgressError{RetryAfter: time.Second})
			return nil
		case err != nil:
			k.fail(c, err)
			return nil
		}
		rec = next
	}
}

// Kept reports whether an answer with this status is stored and replayed:
// final outcomes only. 2xx except 202 (the outcome is not known yet), 402 (a
// decline), and 409 from the handler (a business conflict; the
// middleware's own 409 never reaches here). Everything else gives the key
// back, so the client may send it again.
func Kept(status int) bool {
	switch {
	case status == http.StatusAccepted:
		return false
	case status >= 200 && status < 300:
		return true
	case status == http.StatusPaymentRequired, status == http.StatusConflict:
		return true
	}
	return false
}

// replay writes a stored answer, marked as replayed.
func replay(c *gin.Context, resp *Response) {
	h := c.Writer.Header()
	if resp.ContentType != "" {
		h.Set("Content-Type", resp.ContentType)
	}
	if resp.Location != "" {
		h.Set("Location", resp.Location)
	}
	h.Set(HeaderReplayed, "true")
	c.Status(resp.Status)
	_, _ = c.Writer.Write(resp.Body)
	c.Abort()
}

// fail answers err through the ErrorRenderer and tells the Observer what
// kind of refusal it was.
func (k *Keeper) fail(c *gin.Context, err error) {
	var inProgress *InProgressError
	outcome := OutcomeError
	switch {
	case errors.Is(err, ErrKeyMissing):
		outcome = OutcomeMissingKey
	case errors.Is(err, ErrKeyInvalid):
		outcome = OutcomeInvalidKey
	case errors.Is(err, ErrKeyReused):
		outcome = OutcomeMismatch
	case errors.As(err, &inProgress):
		outcome = OutcomeInProgress
	case errors.Is(err, ErrMalformedBody):
		outcome = OutcomeInvalidBody
	case errors.As(err, new(*RateLimitedError)):
		outcome = OutcomeRateLimited
	}
	k.obs.Outcome(c.FullPath(), outcome)
	k.render(c, err)
}

// retryLater runs a fenced write again with a growing pause until it
// succeeds, is fenced out, or the lock it protects would have run out anyway.
func (k *Keeper) retryLater(write func(ctx context.Context) error) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), k.cfg.LockTimeout)
		defer cancel()
		pause := 100 * time.Millisecond
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			err := write(ctx)
			if err == nil || errors.Is(err, ErrFenced) {
				return
			}
			pause = min(pause*2, 2*time.Second)
		}
	}()
}
