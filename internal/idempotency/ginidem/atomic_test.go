package ginidem_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/dbtx"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
)

// uniqueThings is a business table with a natural unique key, the usual
// first endpoint of a fork: one thing per name per scope.
const uniqueThings = `CREATE TABLE named_things (scope TEXT NOT NULL, name TEXT NOT NULL, id TEXT NOT NULL,
	PRIMARY KEY (scope, name))`

// TestAtomicHandlerWhoseStatementFails is the trap a fork's first endpoint
// falls into on PostgreSQL: the handler's insert fails on the unique key and
// is answered with a business 409, which aborts the transaction there. The
// replay, the 422 and the kept 409 must come out right on both dialects, and
// under a storm of identical requests.
func TestAtomicHandlerWhoseStatementFails(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{Wait: 10 * time.Second})
		require.NoError(t, e.db.Exec(uniqueThings).Error)
		mw := e.middleware(t, idempotency.Config{Wait: 10 * time.Second})
		var seq int
		var mu sync.Mutex
		e.engine.POST("/named", mw.Atomic(func(c *gin.Context) (idempotency.Answer, error) {
			var in thingIn
			if err := c.ShouldBindJSON(&in); err != nil || in.Name == "" {
				return idempotency.Answer{}, errValidation
			}
			mu.Lock()
			seq++
			id := "nt_" + string(rune('a'+seq%26)) + time.Now().Format("150405.000000000")
			mu.Unlock()
			err := dbtx.Conn(c.Request.Context(), e.db).Exec(
				"INSERT INTO named_things (scope, name, id) VALUES (?, ?, ?)", c.GetHeader("X-Merchant"), in.Name, id).Error
			if err != nil {
				// The pattern a fork copies: a unique violation is a
				// business conflict, a final answer stored like a success.
				return idempotency.Answer{Status: http.StatusConflict, Header: http.Header{"Content-Type": {"application/problem+json"}},
					Body: []byte(`{"code":"name_taken","status":409}`), Final: true}, nil
			}
			return reply(http.StatusCreated, gin.H{"id": id, "name": in.Name}, "Location", "/named/"+id), nil
		}))
		count := func() int64 {
			var n int64
			require.NoError(t, e.db.Raw("SELECT count(*) FROM named_things").Scan(&n).Error)
			return n
		}

		first := e.post("m1", "/named", "k-ada", `{"name":"ada"}`)
		require.Equal(t, 201, first.Code, first.Body.String())
		again := e.post("m1", "/named", "k-ada", `{"name":"ada"}`)
		require.Equal(t, 201, again.Code, "the replay: %s", again.Body.String())
		require.Equal(t, "true", again.Header().Get(ginidem.HeaderReplayed))
		require.Equal(t, first.Body.String(), again.Body.String())
		reused := e.post("m1", "/named", "k-ada", `{"name":"grace"}`)
		require.Equal(t, 422, reused.Code, reused.Body.String())

		taken := e.post("m1", "/named", "k-other", `{"name":"ada"}`)
		require.Equal(t, 409, taken.Code, taken.Body.String())
		require.Empty(t, taken.Header().Get(ginidem.HeaderReplayed))
		taken = e.post("m1", "/named", "k-other", `{"name":"ada"}`)
		require.Equal(t, 409, taken.Code, "the kept 409 replays: %s", taken.Body.String())
		require.Equal(t, "true", taken.Header().Get(ginidem.HeaderReplayed))
		require.Equal(t, 422, e.post("m1", "/named", "k-other", `{"name":"linus"}`).Code)
		require.EqualValues(t, 1, count())

		// Thirty identical requests at once: one thing, thirty identical
		// answers.
		const n = 30
		var wg sync.WaitGroup
		codes, bodies := make([]int, n), make([]string, n)
		for i := range n {
			wg.Go(func() {
				w := e.post("m1", "/named", "k-storm", `{"name":"storm"}`)
				codes[i], bodies[i] = w.Code, w.Body.String()
			})
		}
		wg.Wait()
		for i := range n {
			require.Equal(t, 201, codes[i], bodies[i])
			require.Equal(t, bodies[0], bodies[i])
		}
		require.EqualValues(t, 2, count())
	})
}

// TestAtomicDecodesBeforeTheTransaction: the transaction begins at the
// handler's first statement, so a body refused by the handler takes no
// connection from the pool.
func TestAtomicDecodesBeforeTheTransaction(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		e := newTestEnv(t, d, idempotency.Config{})
		sqlDB, err := e.db.DB()
		require.NoError(t, err)
		var inUse []int
		mw := e.middleware(t, idempotency.Config{})
		e.engine.POST("/inspect", mw.Atomic(func(c *gin.Context) (idempotency.Answer, error) {
			inUse = append(inUse, sqlDB.Stats().InUse)
			if c.Query("write") == "" {
				return idempotency.Answer{}, errValidation
			}
			require.NoError(t, dbtx.Conn(c.Request.Context(), e.db).Exec(
				"INSERT INTO things (scope, id, name) VALUES ('m1', 'inspect', 'x')").Error)
			inUse = append(inUse, sqlDB.Stats().InUse)
			return reply(201, gin.H{"ok": true}), nil
		}))
		require.Equal(t, 400, e.post("m1", "/inspect", "k-refused", `{}`).Code)
		require.Equal(t, 201, e.post("m1", "/inspect?write=1", "k-written", `{}`).Code)
		require.Equal(t, []int{0, 0, 1}, inUse, "no connection before the first statement; one after")
	})
}

// TestObserverHearsOneOutcomePerRequest counts outcomes against requests,
// through a takeover in which the first owner's answer is fenced out.
func TestObserverHearsOneOutcomePerRequest(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		obs := &recordingObserver{outcomes: map[string]int{}}
		e := newTestEnv(t, d, idempotency.Config{Observer: obs, LockTimeout: 30 * time.Second, Wait: 50 * time.Millisecond})
		requests := 0
		post := func(path, key, body string) int {
			requests++
			return e.post("m1", path, key, body).Code
		}

		// The first owner makes its action and blocks before the call; its
		// lock runs out; a retry on another instance takes the record over
		// and stores its answer; the first owner is then fenced out.
		hold := make(chan struct{})
		k := e.keeper(t, idempotency.Config{Observer: obs, Wait: 50 * time.Millisecond})
		first := e.instance(k)
		e.actions.Store(first, e.registerActionsHeld(k, hold))
		e.engine.POST("/slow", first.Guarded(e.guardedAction(first)))
		second := e.middleware(t, idempotency.Config{Observer: obs, Wait: 50 * time.Millisecond})
		other := gin.New()
		other.POST("/slow", second.Guarded(e.guardedAction(second)))

		done := make(chan int)
		requests++
		go func() {
			w := httptest.NewRecorder()
			e.engine.ServeHTTP(w, httptestRequest("m1", "/slow", "fenced", `{}`))
			done <- w.Code
		}()
		require.Eventually(t, func() bool {
			rec, err := e.store.Get(context.Background(), "m1", "fenced", e.clock.Now())
			return err == nil && strings.HasPrefix(rec.Point, "action_calling:")
		}, 5*time.Second, time.Millisecond)
		e.clock.Advance(31 * time.Second)
		requests++
		w := httptest.NewRecorder()
		other.ServeHTTP(w, httptestRequest("m1", "/slow", "fenced", `{}`))
		require.Equal(t, 201, w.Code, "the retry took over: %s", w.Body.String())
		close(hold)
		require.Equal(t, 409, <-done, "the fenced owner sends the client to the stored answer")
		require.EqualValues(t, 1, e.outside.Load(), "the stale owner's call was deduplicated: one action at the outside service")
		require.Equal(t, 201, post("/slow", "fenced", `{}`))

		require.Equal(t, 201, post("/atomic/things", "o-1", `{"name":"a"}`))
		require.Equal(t, 201, post("/atomic/things", "o-1", `{"name":"a"}`))
		require.Equal(t, 422, post("/atomic/things", "o-1", `{"name":"b"}`))
		require.Equal(t, 400, post("/atomic/things", "", `{"name":"a"}`))

		obs.mu.Lock()
		defer obs.mu.Unlock()
		total := 0
		for _, n := range obs.outcomes {
			total += n
		}
		require.Equal(t, requests, total, "one outcome per request: %v", obs.outcomes)
		require.Equal(t, 1, obs.outcomes["recovered"])
		require.Equal(t, 1, obs.outcomes["in_progress"], "the fenced owner's one outcome")
		require.Equal(t, 2, obs.outcomes["replayed"])
	})
}

func httptestRequest(merchant, path, key, body string) *http.Request {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Merchant", merchant)
	req.Header.Set(idempotency.HeaderKey, key)
	return req
}
