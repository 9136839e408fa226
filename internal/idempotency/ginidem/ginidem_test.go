package ginidem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"gorm.io/gorm"

	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/idempotency/gormstore/gormtest"
	"github.com/idemkeys/payments/internal/idempotency/localcache"
	"github.com/idemkeys/payments/internal/testkit"
)

// testEnv is a Gin engine with one Atomic and one Guarded route over a real
// database. The handlers write real rows (things) so that tests count effects
// in the database, not only status codes.
type testEnv struct {
	db         *gorm.DB
	store      *gormstore.Store
	clock      *testkit.Clock
	engine     *gin.Engine
	executions atomic.Int64
	seen       sync.Map // "fresh" or "resumed": how each Guarded execution began, by key
	block      chan struct{}
	started    chan struct{}
	// actions are the action Effect of each instance (middleware).
	actions sync.Map
	// outside counts the actions a held outside service executed (see
	// registerActionsHeld), one per key however often it is asked.
	outside atomic.Int64
}

type thingIn struct {
	Name   string `json:"name"`
	Status int    `json:"status"`
	Block  bool   `json:"block"`
	Sleep  int    `json:"sleep_ms"`
}

// thingsTable is the test's own business table: one thing per row, scoped
// like the records. actionsTable holds the Guarded route's resources: an
// action at an outside service, what the test asked the service to answer
// (want), and where it stands.
const (
	thingsTable = `CREATE TABLE things (scope TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL,
	PRIMARY KEY (scope, id))`
	actionsTable = `CREATE TABLE actions (scope TEXT NOT NULL, id TEXT NOT NULL, want INTEGER NOT NULL,
	status TEXT NOT NULL, PRIMARY KEY (scope, id))`
)

func newTestEnv(t *testing.T, dialect string, cfg idempotency.Config) *testEnv {
	t.Helper()
	gin.SetMode(gin.TestMode)
	e := &testEnv{db: gormtest.Open(t, dialect, thingsTable, actionsTable), clock: newFakeClock(), block: make(chan struct{}), started: make(chan struct{}, 100)}
	e.store = gormstore.New(e.db)
	mw := e.middleware(t, cfg)
	r := gin.New()
	r.POST("/atomic/things", mw.Atomic(e.createThing))
	r.POST("/guarded/things/:id/actions", mw.Guarded(e.guardedAction(mw)))
	e.engine = r
	return e
}

// middleware is another Keeper over the env's store and clock: another
// process, as far as in-process coalescing can tell.
func (e *testEnv) middleware(t *testing.T, cfg idempotency.Config) *ginidem.Middleware {
	return e.instance(e.keeper(t, cfg))
}

// keeper is another Keeper over the env's store and clock.
func (e *testEnv) keeper(t *testing.T, cfg idempotency.Config) *idempotency.Keeper {
	cfg.Now, cfg.Transactor = e.clock.Now, e.store
	if cfg.Cache == nil {
		cfg.Cache = localcache.New(localcache.DefaultSize, nil) // as the API wires it
	}
	k := idempotency.New(e.store, cfg)
	return k
}

// instance is k's middleware, with the action Effect registered on k.
func (e *testEnv) instance(k *idempotency.Keeper) *ginidem.Middleware {
	mw := ginidem.New(k, ginidem.Options{
		Scope:  func(c *gin.Context) string { return c.GetHeader("X-Merchant") },
		Answer: testAnswer,
	})
	e.actions.Store(mw, e.registerActions(k))
	return mw
}

// reply is a JSON answer, final as a payments API's answers are: a success
// but a 202 (the outcome is not known yet), and a decline (402). header
// holds name and value pairs.
func reply(status int, v any, header ...string) idempotency.Answer {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	final := (status >= 200 && status < 300 && status != http.StatusAccepted) || status == http.StatusPaymentRequired
	return idempotency.Answer{Status: status, Header: h, Body: body, Final: final}
}

// testAnswer stands in for the HTTP layer's error table: none of its
// answers is final.
func testAnswer(_ *gin.Context, err error) idempotency.Answer {
	status, code := http.StatusInternalServerError, "internal_error"
	var header []string
	switch {
	case errors.Is(err, idempotency.ErrKeyMissing):
		status, code = 400, "idempotency_key_missing"
	case errors.Is(err, idempotency.ErrKeyInvalid):
		status, code = 400, "idempotency_key_invalid"
	case errors.Is(err, idempotency.ErrKeyExpired):
		status, code = 409, "idempotency_key_expired"
	case errors.Is(err, idempotency.ErrKeyReused):
		status, code = 422, "idempotency_key_reused"
	case errors.Is(err, idempotency.ErrMalformedBody), errors.Is(err, errValidation):
		status, code = 400, "validation_failed"
	case errors.Is(err, idempotency.ErrInProgress):
		status, code = 409, "idempotency_request_in_progress"
		header = []string{"Retry-After", strconv.Itoa(int(idempotency.RetryAfter(err).Seconds()))}
	}
	a := reply(status, gin.H{"code": code, "detail": err.Error()}, header...)
	a.Final = false
	return a
}

// errValidation is the handlers' refusal of a body.
var errValidation = errors.New("validation_failed")

var thingSeq atomic.Int64

func (e *testEnv) createThing(c *gin.Context) (idempotency.Answer, error) {
	var in thingIn
	if err := c.ShouldBindJSON(&in); err != nil || in.Name == "" {
		return idempotency.Answer{}, errValidation
	}
	ctx := c.Request.Context()
	id := fmt.Sprintf("th_%d", thingSeq.Add(1))
	err := dbtx.Conn(ctx, e.db).Exec(`INSERT INTO things (scope, id, name) VALUES (?, ?, ?)`,
		c.GetHeader("X-Merchant"), id, in.Name).Error
	if err != nil {
		return idempotency.Answer{}, err
	}
	return reply(http.StatusCreated, gin.H{"id": id, "name": in.Name}, "Location", "/atomic/things/"+id, "ETag", `"1"`), nil
}

// action is the Guarded route's resource: an action at an outside service
// that answers what the request asked (want): 201 done, 402 declined, 202
// lost (the outcome unknown), 500 not executed.
type action struct {
	Scope, ID string
	Want      int
	Status    string
}

// registerActions is the action Effect on k, over the actions table.
func (e *testEnv) registerActions(k *idempotency.Keeper) *idempotency.Effect[action, int] {
	return idempotency.Register(k, e.actionEffect())
}

// registerActionsHeld is the action Effect on k with an outside
// service that waits for hold before it executes, and executes once per
// idempotency key it is sent (as a provider does): e.outside counts them.
func (e *testEnv) registerActionsHeld(k *idempotency.Keeper, hold <-chan struct{}) *idempotency.Effect[action, int] {
	var executed sync.Map
	effect := e.actionEffect()
	send := effect.Send
	effect.Send = func(ctx context.Context, a action, key string) (int, error) {
		<-hold
		if _, again := executed.LoadOrStore(key, true); !again {
			e.outside.Add(1)
		}
		return send(ctx, a, key)
	}
	return idempotency.Register(k, effect)
}

// actionEffect is the action Effect over the actions table.
func (e *testEnv) actionEffect() idempotency.Effect[action, int] {
	set := func(ctx context.Context, a action, status string) (action, error) {
		a.Status = status
		return a, dbtx.Conn(ctx, e.db).Exec(`UPDATE actions SET status = ? WHERE scope = ? AND id = ?`, status, a.Scope, a.ID).Error
	}
	return idempotency.Effect[action, int]{
		Kind: "action", Prefix: "act_",
		Load: func(ctx context.Context, scope, id string) (action, error) {
			a := action{Scope: scope, ID: id}
			err := dbtx.Conn(ctx, e.db).Raw(`SELECT want, status FROM actions WHERE scope = ? AND id = ?`, scope, id).
				Row().Scan(&a.Want, &a.Status)
			return a, err
		},
		Send: func(_ context.Context, a action, _ string) (int, error) {
			switch a.Want {
			case http.StatusAccepted:
				return 0, errors.New("the outside service's answer was lost")
			case http.StatusInternalServerError:
				return 0, idempotency.ErrNotExecuted
			case 0:
				return http.StatusCreated, nil
			}
			return a.Want, nil
		},
		Find:  func(context.Context, action, string) (int, error) { return 0, idempotency.ErrNoSuchCall },
		Check: func(action, int) error { return nil },
		Settle: func(ctx context.Context, a action, got int) (action, error) {
			if got == http.StatusPaymentRequired {
				return set(ctx, a, "declined")
			}
			return set(ctx, a, "done")
		},
		Unknown: func(ctx context.Context, a action) (action, error) { return set(ctx, a, "unknown") },
		Answer: func(a action) idempotency.Answer {
			switch a.Status {
			case "done":
				return reply(http.StatusCreated, gin.H{"id": a.ID, "status": a.Status})
			case "declined":
				return reply(http.StatusPaymentRequired, gin.H{"id": a.ID, "status": a.Status})
			}
			return reply(http.StatusAccepted, gin.H{"id": a.ID, "status": a.Status})
		},
	}
}

// guardedAction is the Guarded route of instance mw: it runs the action the
// body asks for (blocking or sleeping first, if asked, while it holds the
// key's record), and notes whether it began fresh or resumed an earlier
// attempt's action.
func (e *testEnv) guardedAction(mw *ginidem.Middleware) ginidem.GuardedHandler {
	return func(c *gin.Context, op *idempotency.Op) (idempotency.Answer, error) {
		v, _ := e.actions.Load(mw)
		actions := v.(*idempotency.Effect[action, int])
		var in thingIn
		_ = c.ShouldBindJSON(&in)
		e.executions.Add(1)
		e.started <- struct{}{}
		if in.Block {
			<-e.block
		}
		if in.Sleep > 0 {
			time.Sleep(time.Duration(in.Sleep) * time.Millisecond)
		}
		how := "resumed"
		a, err := actions.Run(c.Request.Context(), op, func(ctx context.Context, call idempotency.Call) (action, error) {
			how = "fresh"
			a := action{Scope: call.Scope, ID: call.ID, Want: in.Status, Status: "pending"}
			return a, dbtx.Conn(ctx, e.db).Exec(`INSERT INTO actions (scope, id, want, status) VALUES (?, ?, ?, ?)`,
				a.Scope, a.ID, a.Want, a.Status).Error
		})
		e.seen.Store(c.GetHeader(idempotency.HeaderKey), how)
		if err != nil {
			return idempotency.Answer{}, err
		}
		return actions.Answer(a), nil
	}
}

func (e *testEnv) post(merchant, path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if merchant != "" {
		req.Header.Set("X-Merchant", merchant)
	}
	if key != "" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	w := httptest.NewRecorder()
	e.engine.ServeHTTP(w, req)
	return w
}

func (e *testEnv) orders(t *testing.T, merchant string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, e.db.Raw("SELECT count(*) FROM things WHERE scope = ?", merchant).Scan(&n).Error)
	return n
}

func code(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct {
		Code string `json:"code"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
	return body.Code
}

func eachDialect(t *testing.T, fn func(t *testing.T, d string)) {
	for _, d := range gormtest.Dialects {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			fn(t, d)
		})
	}
}

func TestAtomicCreate(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{})

		first := e.post("m1", "/atomic/things", "key-1", `{"name":"coffee"}`)
		require.Equal(t, 201, first.Code, first.Body.String())
		require.Empty(t, first.Header().Get(ginidem.HeaderReplayed))
		require.EqualValues(t, 1, e.orders(t, "m1"))

		// Same request, other member order and spacing: the same fingerprint.
		again := e.post("m1", "/atomic/things", "key-1", ` { "name" : "coffee" } `)
		require.Equal(t, 201, again.Code)
		require.Equal(t, "true", again.Header().Get(ginidem.HeaderReplayed))
		require.Equal(t, first.Body.Bytes(), again.Body.Bytes(), "the replay is byte-identical")
		require.Equal(t, first.Header().Get("Location"), again.Header().Get("Location"))
		require.Equal(t, first.Header().Get("Content-Type"), again.Header().Get("Content-Type"))
		require.Equal(t, `"1"`, again.Header().Get("ETag"), "the headers that describe the result are stored")
		require.EqualValues(t, 1, e.orders(t, "m1"), "a replay creates nothing")

		reused := e.post("m1", "/atomic/things", "key-1", `{"name":"tea"}`)
		require.Equal(t, 422, reused.Code)
		require.Equal(t, "idempotency_key_reused", code(t, reused))
		require.EqualValues(t, 1, e.orders(t, "m1"))

		// Another merchant's same key is another operation.
		other := e.post("m2", "/atomic/things", "key-1", `{"name":"tea"}`)
		require.Equal(t, 201, other.Code)
		require.Empty(t, other.Header().Get(ginidem.HeaderReplayed))
		require.EqualValues(t, 1, e.orders(t, "m2"))
	})
}

// TestRetryOfTheSameBytes: a retry that sends the very bytes of a request
// this process completed is known by those bytes (its body is not
// canonicalized again) and replayed; the same bytes to another route, or
// another path parameter, under the key are still another request.
func TestRetryOfTheSameBytes(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{})
		const body = `{"name":"coffee"}`
		first := e.post("m1", "/atomic/things", "key-same", body)
		require.Equal(t, 201, first.Code, first.Body.String())
		for range 3 {
			again := e.post("m1", "/atomic/things", "key-same", body)
			require.Equal(t, 201, again.Code)
			require.Equal(t, "true", again.Header().Get(ginidem.HeaderReplayed))
			require.Equal(t, first.Body.Bytes(), again.Body.Bytes())
		}
		require.EqualValues(t, 1, e.orders(t, "m1"))

		other := e.post("m1", "/guarded/things/t1/actions", "key-same", body)
		require.Equal(t, 422, other.Code, other.Body.String())
		require.Equal(t, "idempotency_key_reused", code(t, other))

		done := e.post("m1", "/guarded/things/t1/actions", "key-action", body)
		require.Less(t, done.Code, 300, done.Body.String())
		again := e.post("m1", "/guarded/things/t1/actions", "key-action", body)
		require.Equal(t, done.Code, again.Code)
		require.Equal(t, "true", again.Header().Get(ginidem.HeaderReplayed))
		param := e.post("m1", "/guarded/things/t2/actions", "key-action", body)
		require.Equal(t, 422, param.Code, param.Body.String())
		require.EqualValues(t, 1, e.orders(t, "m1"))
	})
}

func TestKeyAndBodyErrorsChangeNothing(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{})
		cases := []struct {
			name, key, body, code string
			status                int
		}{
			{"missing key", "", `{"name":"a"}`, "idempotency_key_missing", 400},
			{"space in key", "a b", `{"name":"a"}`, "idempotency_key_invalid", 400},
			{"non-ASCII key", "clé", `{"name":"a"}`, "idempotency_key_invalid", 400},
			{"key too long", strings.Repeat("k", 256), `{"name":"a"}`, "idempotency_key_invalid", 400},
			{"malformed JSON", "k-json", `{"name":`, "validation_failed", 400},
			{"duplicate member", "k-dup", `{"name":"a","name":"b"}`, "validation_failed", 400},
			{"handler validation", "k-valid", `{"name":""}`, "validation_failed", 400},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				w := e.post("m1", "/atomic/things", tc.key, tc.body)
				require.Equal(t, tc.status, w.Code, w.Body.String())
				require.Equal(t, tc.code, code(t, w))
			})
		}
		require.EqualValues(t, 0, e.orders(t, "m1"))
		var records int64
		require.NoError(t, e.db.Raw("SELECT count(*) FROM idempotency_records").Scan(&records).Error)
		require.Zero(t, records, "no answer above is stored")

		// A 400 from the handler is not stored: the key may be sent again,
		// even with another body.
		w := e.post("m1", "/atomic/things", "k-valid", `{"name":"fixed"}`)
		require.Equal(t, 201, w.Code)
		require.EqualValues(t, 1, e.orders(t, "m1"))

		// A key of exactly 255 visible characters is fine.
		w = e.post("m1", "/atomic/things", strings.Repeat("~", 255), `{"name":"long"}`)
		require.Equal(t, 201, w.Code)
	})
}

func TestAtomicConcurrentDuplicatesCreateOneOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{Wait: 10 * time.Second})
		const n = 50
		bodies := make([]string, n)
		codes := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				w := e.post("m1", "/atomic/things", "storm", `{"name":"storm"}`)
				codes[i], bodies[i] = w.Code, w.Body.String()
			})
		}
		wg.Wait()
		for i := range n {
			require.Equal(t, 201, codes[i], bodies[i])
			require.Equal(t, bodies[0], bodies[i], "every duplicate sees the one result")
		}
		require.EqualValues(t, 1, e.orders(t, "m1"))
	})
}

func TestAtomicAcrossKeepers(t *testing.T) {
	// Two keepers over one database stand for two API processes: the unique
	// key, not the in-process coalescing, keeps them to one order.
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{})
		other := e.middleware(t, idempotency.Config{TTL: time.Hour, LockTimeout: time.Minute, Wait: 5 * time.Second})
		r2 := gin.New()
		r2.POST("/atomic/things", other.Atomic(e.createThing))

		var wg sync.WaitGroup
		codes := make([]int, 40)
		for i := range 40 {
			wg.Go(func() {
				req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/atomic/things", strings.NewReader(`{"name":"x"}`))
				req.Header.Set("X-Merchant", "m1")
				req.Header.Set(idempotency.HeaderKey, "two-processes")
				w := httptest.NewRecorder()
				if i%2 == 0 {
					e.engine.ServeHTTP(w, req)
				} else {
					r2.ServeHTTP(w, req)
				}
				codes[i] = w.Code
			})
		}
		wg.Wait()
		for _, c := range codes {
			require.Equal(t, 201, c)
		}
		require.EqualValues(t, 1, e.orders(t, "m1"))
	})
}

func TestAtomicKeyExpires(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{TTL: time.Hour})
		require.Equal(t, 201, e.post("m1", "/atomic/things", "ttl", `{"name":"a"}`).Code)
		e.clock.Advance(59 * time.Minute)
		require.Equal(t, "true", e.post("m1", "/atomic/things", "ttl", `{"name":"a"}`).Header().Get(ginidem.HeaderReplayed))
		e.clock.Advance(time.Minute)
		w := e.post("m1", "/atomic/things", "ttl", `{"name":"b"}`)
		require.Equal(t, 201, w.Code, "after the TTL the key is new again")
		require.Empty(t, w.Header().Get(ginidem.HeaderReplayed))
		require.EqualValues(t, 2, e.orders(t, "m1"))
	})
}

func TestGuardedConcurrentDuplicatesExecuteOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{Wait: 10 * time.Second})
		const n = 50
		var wg sync.WaitGroup
		bodies := make([]string, n)
		for i := range n {
			wg.Go(func() {
				w := e.post("m1", "/guarded/things/t1/actions", "g-storm", `{"sleep_ms":100}`)
				require.Equal(t, 201, w.Code, w.Body.String())
				bodies[i] = w.Body.String()
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, e.executions.Load())
		for i := range n {
			require.Equal(t, bodies[0], bodies[i])
		}
	})
}

func TestGuardedDuplicateWaitsThenConflicts(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{Wait: 100 * time.Millisecond})
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- e.post("m1", "/guarded/things/t1/actions", "busy", `{"block":true}`) }()
		<-e.started

		w := e.post("m1", "/guarded/things/t1/actions", "busy", `{"block":true}`)
		require.Equal(t, 409, w.Code)
		require.Equal(t, "idempotency_request_in_progress", code(t, w))
		require.NotEmpty(t, w.Header().Get("Retry-After"))

		// Another path under the same key is a different request.
		w = e.post("m1", "/guarded/things/t2/actions", "busy", `{"block":true}`)
		require.Equal(t, 422, w.Code)

		close(e.block)
		original := <-done
		require.Equal(t, 201, original.Code)
		w = e.post("m1", "/guarded/things/t1/actions", "busy", `{"block":true}`)
		require.Equal(t, 201, w.Code)
		require.Equal(t, "true", w.Header().Get(ginidem.HeaderReplayed))
		require.Equal(t, original.Body.String(), w.Body.String())
		require.EqualValues(t, 1, e.executions.Load())
	})
}

func TestGuardedCrashedOwnerIsTakenOverWithFencing(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{LockTimeout: 30 * time.Second, Wait: 50 * time.Millisecond})
		ctx := context.Background()

		// A process reserved the key, reached "step1", and died.
		w := e.post("m1", "/guarded/things/t1/actions", "crash", `{"status":500}`)
		require.Equal(t, 500, w.Code)
		rec, err := e.store.Get(ctx, "m1", "crash", e.clock.Now())
		require.NoError(t, err, "past its first step, a failed request leaves its record to resume")
		staleFence := rec.Fence
		_, err = e.store.TakeOver(ctx, "m1", "crash", staleFence, e.clock.Now(), e.clock.Now().Add(30*time.Second))
		require.NoError(t, err)
		staleFence++ // the "dead" owner's token

		// While its lock holds, a retry waits and gets 409.
		w = e.post("m1", "/guarded/things/t1/actions", "crash", `{"status":500}`)
		require.Equal(t, 409, w.Code)

		e.clock.Advance(31 * time.Second)
		w = e.post("m1", "/guarded/things/t1/actions", "crash", `{"status":500}`)
		require.Equal(t, 500, w.Code, "the retry ran the operation again")
		seen, _ := e.seen.Load("crash")
		require.Equal(t, "resumed", seen, "and resumed from the recovery point")

		// The dead owner wakes up: it can no longer write.
		require.ErrorIs(t, e.store.Complete(ctx, "m1", "crash", staleFence, idempotency.Answer{Status: 201, Final: true}, e.clock.Now()), idempotency.ErrFenced)
	})
}

func TestGuardedAcceptedKeepsRecordOpen(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{})
		w := e.post("m1", "/guarded/things/t1/actions", "pending", `{"status":202}`)
		require.Equal(t, 202, w.Code)
		// A retry resumes at once (the 202 unlocked the record).
		w = e.post("m1", "/guarded/things/t1/actions", "pending", `{"status":202}`)
		require.Equal(t, 202, w.Code)
		require.Empty(t, w.Header().Get(ginidem.HeaderReplayed))
		seen, _ := e.seen.Load("pending")
		require.Equal(t, "resumed", seen)
		require.EqualValues(t, 2, e.executions.Load())

		// A decline is final: stored with its settlement, and replayed.
		w = e.post("m1", "/guarded/things/t1/actions", "released", `{"status":402}`)
		require.Equal(t, 402, w.Code)
		w = e.post("m1", "/guarded/things/t1/actions", "released", `{"status":402}`)
		require.Equal(t, "true", w.Header().Get(ginidem.HeaderReplayed), "a 402 is final and kept")
	})
}

func TestPanickingHandlerReleasesTheKey(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{})
		var calls atomic.Int64
		panics := func(c *gin.Context) (idempotency.Answer, error) {
			if calls.Add(1) == 1 {
				panic("boom")
			}
			return reply(201, gin.H{"ok": true}), nil
		}
		recovered := func(c *gin.Context) {
			defer func() {
				if recover() != nil {
					c.AbortWithStatusJSON(500, gin.H{"code": "internal_error"})
				}
			}()
			c.Next()
		}
		keeper := e.middleware(t, idempotency.Config{TTL: time.Hour, LockTimeout: time.Minute, Wait: time.Second})
		e.engine.POST("/panics/guarded", recovered, keeper.Guarded(func(c *gin.Context, _ *idempotency.Op) (idempotency.Answer, error) { return panics(c) }))
		e.engine.POST("/panics/atomic", recovered, keeper.Atomic(panics))

		for _, path := range []string{"/panics/guarded", "/panics/atomic"} {
			calls.Store(0)
			w := e.post("m1", path, "panic-"+path, `{}`)
			require.Equal(t, 500, w.Code, "the recovery middleware's answer reaches the client")
			require.Equal(t, "internal_error", code(t, w))
			w = e.post("m1", path, "panic-"+path, `{}`)
			require.Equal(t, 201, w.Code, "the key was given back: %s", w.Body.String())
		}
	})
}

type recordingObserver struct {
	mu       sync.Mutex
	outcomes map[string]int
	waits    int
}

func (o *recordingObserver) Outcome(_ context.Context, _ string, out string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes[out]++
}

func (o *recordingObserver) Waited(context.Context, string, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waits++
}

func (o *recordingObserver) Processed(context.Context, string, time.Duration) {}

func TestObserverHearsEveryOutcome(t *testing.T) {
	obs := &recordingObserver{outcomes: map[string]int{}}
	e := newTestEnv(t, "sqlite", idempotency.Config{Observer: obs, Wait: 50 * time.Millisecond})
	e.post("m1", "/atomic/things", "o-1", `{"name":"a"}`)
	e.post("m1", "/atomic/things", "o-1", `{"name":"a"}`)
	e.post("m1", "/atomic/things", "o-1", `{"name":"b"}`)
	e.post("m1", "/atomic/things", "", `{"name":"a"}`)
	e.post("m1", "/atomic/things", "a b", `{"name":"a"}`)
	e.post("m1", "/atomic/things", "o-2", `{"name":`)

	done := make(chan struct{})
	go func() {
		defer close(done)
		e.post("m1", "/guarded/things/t1/actions", "o-busy", `{"block":true}`)
	}()
	<-e.started
	e.post("m1", "/guarded/things/t1/actions", "o-busy", `{"block":true}`)
	close(e.block)
	<-done

	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Equal(t, map[string]int{
		"executed":     2, // the order, and the blocked original
		"replayed":     1,
		"mismatch":     1,
		"missing_key":  1,
		"invalid_key":  1,
		"invalid_body": 1,
		"in_progress":  1,
	}, obs.outcomes)
	require.GreaterOrEqual(t, obs.waits, 1)
}
