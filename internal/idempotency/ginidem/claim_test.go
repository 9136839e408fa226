package ginidem_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
)

// Keeper.Claim is how work outside any request (the reconciler's cancel)
// fences an open record against a late retry of its key: while the claim
// holds, a retry waits; the claim's answer, once stored, is what the retry
// gets; a claim given back lets the retry resume; and a claim whose lock ran
// out loses to the retry that took the record over.
func TestClaimFencesAnOpenRecord(t *testing.T) {
	eachDialect(t, func(t *testing.T, d string) {
		cfg := idempotency.Config{LockTimeout: 30 * time.Second, Wait: 50 * time.Millisecond}
		e := newTestEnv(t, d, cfg)
		ctx := context.Background()
		cfg.Clock = e.clock
		k := idempotency.New(e.store, cfg)
		t.Cleanup(func() { _ = k.Close(context.Background()) })
		open := func(key string) {
			t.Helper()
			// A 202 leaves the record open at step1, unlocked.
			require.Equal(t, 202, e.post("m1", "/guarded/things/t1/actions", key, `{"status":202}`).Code)
		}
		retry := func(key string) int {
			return e.post("m1", "/guarded/things/t1/actions", key, `{"status":202}`).Code
		}

		t.Run("held, then completed: the retry gets the claim's answer", func(t *testing.T) {
			open("c1")
			runs := e.executions.Load()
			c, err := k.Claim(ctx, "m1", "c1", step1.Resource)
			require.NoError(t, err)
			require.Equal(t, 409, retry("c1"), "a retry waits for the claim, then is told to come back")
			_, err = k.Claim(ctx, "m1", "c1", step1.Resource)
			require.ErrorIs(t, err, idempotency.ErrLocked, "one claim at a time")

			require.NoError(t, c.Complete(ctx, idempotency.Answer{Status: 409, Header: http.Header{"Content-Type": {"application/problem+json"}}, Body: []byte(`{"code":"payment_canceled"}`), Final: true}))
			c.Published()
			w := e.post("m1", "/guarded/things/t1/actions", "c1", `{"status":202}`)
			require.Equal(t, 409, w.Code)
			require.Equal(t, "true", w.Header().Get(idempotency.HeaderReplayed))
			require.Equal(t, runs, e.executions.Load(), "the retry ran nothing")
		})

		t.Run("released: the retry resumes at once", func(t *testing.T) {
			open("c2")
			runs := e.executions.Load()
			c, err := k.Claim(ctx, "m1", "c2", step1.Resource)
			require.NoError(t, err)
			require.NoError(t, c.Release(ctx))
			require.Equal(t, 202, retry("c2"))
			require.Equal(t, runs+1, e.executions.Load())
		})

		t.Run("another operation's record, or none: not found", func(t *testing.T) {
			open("c3")
			_, err := k.Claim(ctx, "m1", "c3", "pay_other")
			require.ErrorIs(t, err, idempotency.ErrNotFound)
			_, err = k.Claim(ctx, "m1", "never-used", "")
			require.ErrorIs(t, err, idempotency.ErrNotFound)
		})

		t.Run("a claim whose lock ran out loses to the retry", func(t *testing.T) {
			open("c4")
			c, err := k.Claim(ctx, "m1", "c4", step1.Resource)
			require.NoError(t, err)
			e.clock.Advance(31 * time.Second)
			require.Equal(t, 202, retry("c4"), "the retry took the record over")
			require.ErrorIs(t, c.Complete(ctx, idempotency.Answer{Status: 409, Final: true}), idempotency.ErrFenced)
		})
	})
}
