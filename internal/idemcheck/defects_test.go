package idemcheck_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idemcheck"
)

// TestCanonicalNamesWhatMattered: fingerprint-canonical says which change
// made the endpoint see another request: member order alone, whitespace
// alone never blamed for it, or both.
func TestCanonicalNamesWhatMattered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      flaws
		reason string
	}{
		{"member order only", flaws{orderedFingerprint: true}, "member order changes the request for the endpoint (refused with 422 idempotency_key_reused); added whitespace does not (replayed)"},
		{"the bytes", flaws{rawFingerprint: true}, "added whitespace and member order each change the request for the endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(flawedServer(tc.f))
			t.Cleanup(srv.Close)
			rep, err := idemcheck.Run(context.Background(), config(srv), idemcheck.FingerprintCanonical)
			require.NoError(t, err)
			res := rep.Results[0]
			require.Equal(t, idemcheck.Advice, res.Verdict, res.Reason)
			requireReason(t, res, tc.reason)
			require.Len(t, res.Evidence, 3, "the first request and one request per change")
		})
	}
}

// TestConcurrentSaysWhatItSaw: the concurrent check's tally and effect
// count are in its reason whatever the verdict, and a failure counts the
// resources the copies made by their ids, not by a Location they share.
func TestConcurrentSaysWhatItSaw(t *testing.T) {
	srv := httptest.NewServer(flawedServer(flaws{wait: time.Millisecond, noRetryAfter: true}))
	t.Cleanup(srv.Close)
	rep, err := idemcheck.Run(context.Background(), config(srv), idemcheck.Concurrent)
	require.NoError(t, err)
	res := rep.Results[0]
	require.Equal(t, idemcheck.Advice, res.Verdict, res.Reason)
	requireReason(t, res, "of the 409 answers carry no retry-after")
	require.Regexp(t, `30 copies at once: 201 × 1, (201 replayed × \d+, )?409 × \d+; 1 new effect counted\.$`, res.Reason)

	echo := httptest.NewServer(echoing())
	t.Cleanup(echo.Close)
	cfg := config(echo)
	cfg.EffectsURL = ""
	rep, err = idemcheck.Run(context.Background(), cfg, idemcheck.Concurrent)
	require.NoError(t, err)
	res = rep.Results[0]
	require.Equal(t, idemcheck.Fail, res.Verdict, res.Reason)
	require.Regexp(t, `^30 copies made 30 different resources: \d+, \d+, \d+, \d+, \d+ and 25 more\. 30 copies at once: 201 × 30\.$`, res.Reason)
}

// TestReuseCountsARefusalOnlyWhereTheRouteExists: a 404 or 405 from a path
// or method no route serves says nothing of the key, so reuse-path and
// reuse-method are not judged there; where the route exists, its refusal
// counts.
func TestReuseCountsARefusalOnlyWhereTheRouteExists(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(counting(flawedServer(flaws{routeFirst: true}), &served))
	t.Cleanup(srv.Close)
	cfg := config(srv)
	cfg.URLVariant = srv.URL + "/v1/nothing"
	rep, err := idemcheck.Run(context.Background(), cfg, idemcheck.ReusePath, idemcheck.ReuseMethod)
	require.NoError(t, err)
	for _, res := range rep.Results {
		require.Equal(t, idemcheck.NotJudged, res.Verdict, "%s: %s", res.ID, res.Reason)
		requireReason(t, res, "without a key too it was answered")
	}
	requireReason(t, rep.Results[0], "answered 404 not_found, so the 404 under the used key says nothing of the key; give -url-variant a route")
	requireReason(t, rep.Results[1], "answered 405 method_not_allowed, so the 405 under the used key says nothing of the key; give -method-variant a method this URL serves")
	require.Equal(t, int(served.Load()), rep.Requests)
	require.LessOrEqual(t, rep.Requests, rep.Plan.Requests)

	cfg.URLVariant = srv.URL + "/v1/customers"
	rep, err = idemcheck.Run(context.Background(), cfg, idemcheck.ReusePath)
	require.NoError(t, err)
	require.Equal(t, idemcheck.Pass, rep.Results[0].Verdict, rep.Results[0].Reason)
	requireReason(t, rep.Results[0], "another path was refused with 422 idempotency_key_reused")
	requireReason(t, rep.Results[0], "the route exists (without a key: 400 idempotency_key_missing)")
}

// defects are the flaws seen in published idempotency middlewares, each
// with the check that must catch it: against the careful server with that
// flaw, the check gives its verdict for the stated reason; against the
// careful server without it (and with whatever the flaw's test needs,
// such as a TTL), the same check passes.
var defects = []struct {
	name    string
	flawed  flaws
	correct flaws
	check   string
	change  func(*idemcheck.Config)
	verdict idemcheck.Verdict
	reason  string
}{
	{
		name: "bodies compared with loose equality", flawed: flaws{looseEqual: true},
		check: idemcheck.ReuseLoose, verdict: idemcheck.Fail,
		reason: `the body with amount 1250 sent as "1250" got the original's answer (201 /v1/orders/ord_`,
	},
	{
		// The handler throws; the layer releases the key only when the
		// handler returns, so it stays locked for good.
		name: "a crash before the answer locks the key", flawed: flaws{lockOnPanic: true, wait: 10 * time.Millisecond}, correct: flaws{wait: 10 * time.Millisecond},
		check: idemcheck.NoCrashLock, change: crashing, verdict: idemcheck.Fail,
		reason: "past -lock-timeout 200ms: a failure before the answer locks it",
	},
	{
		name: "a replayed error loses its Content-Type", flawed: flaws{storeErrors: true, dropErrorType: true}, correct: flaws{storeErrors: true},
		check: idemcheck.ReplayErrorType, verdict: idemcheck.Advice,
		reason: `the replayed 503 lost its content-type: "text/plain; charset=utf-8", first "application/problem+json"`,
	},
	{
		// The expired record is dropped, and the copy that dropped it and
		// the one that came next both run: two orders.
		name: "an expired key's copies both execute", flawed: flaws{ttl: 100 * time.Millisecond, racyExpiry: true}, correct: flaws{ttl: 100 * time.Millisecond},
		check: idemcheck.ExpiryRace, change: func(cfg *idemcheck.Config) { cfg.TTL = 100 * time.Millisecond }, verdict: idemcheck.Fail,
		reason: "new resources after the key expired: ord_",
	},
}

// crashing makes the -body-5xx body one the handler throws on, every time.
func crashing(cfg *idemcheck.Config) {
	cfg.FaultBody = []byte(`{"customer_id":"crash","amount":1250}`)
	cfg.LockTimeout = 200 * time.Millisecond
}

// TestFailureToldApart: after a 5xx the checker tells a stored 5xx from a
// handler that simply failed the same way again (the valid body under the
// key then executes), and a lock that ends within the stated timeout from
// one that does not.
func TestFailureToldApart(t *testing.T) {
	run := func(f flaws, change func(*idemcheck.Config), ids ...string) *idemcheck.Report {
		srv := httptest.NewServer(flawedServer(f))
		t.Cleanup(srv.Close)
		cfg := config(srv)
		change(&cfg)
		rep, err := idemcheck.Run(context.Background(), cfg, ids...)
		require.NoError(t, err)
		return rep
	}

	// The careful server: the handler throws each time, nothing is kept.
	rep := run(flaws{}, crashing, idemcheck.No5xxReplay, idemcheck.NoCrashLock)
	for _, res := range rep.Results {
		require.Equal(t, idemcheck.Pass, res.Verdict, "%s: %s", res.ID, res.Reason)
	}
	requireReason(t, rep.Results[0], "after the 500, the valid body under the key executed (201 /v1/orders/ord_")
	requireReason(t, rep.Results[0], "the 500 was not stored")

	// Stored and marked so: told at the first repeat.
	rep = run(flaws{storeErrors: true}, func(*idemcheck.Config) {}, idemcheck.No5xxReplay)
	require.Equal(t, idemcheck.Advice, rep.Results[0].Verdict, rep.Results[0].Reason)
	requireReason(t, rep.Results[0], "was stored and replayed (503 unavailable_")

	// A crashed request's lock that a later request takes over after
	// 100 ms, as this project's recovery does: it ends, with Retry-After.
	rep = run(flaws{lockOnPanic: true, lockFor: 100 * time.Millisecond, wait: 10 * time.Millisecond}, func(cfg *idemcheck.Config) {
		crashing(cfg)
		cfg.LockTimeout = time.Second
	}, idemcheck.NoCrashLock)
	require.Equal(t, idemcheck.Pass, rep.Results[0].Verdict, rep.Results[0].Reason)
	requireReason(t, rep.Results[0], "the key answered 409 after the 500, and was free again within -lock-timeout 1s: 500 internal_error")
}

func TestEachDefectFailsItsCheck(t *testing.T) {
	for _, d := range defects {
		t.Run(d.name, func(t *testing.T) {
			run := func(f flaws) idemcheck.Result {
				srv := httptest.NewServer(flawedServer(f))
				t.Cleanup(srv.Close)
				cfg := config(srv)
				if d.change != nil {
					d.change(&cfg)
				}
				rep, err := idemcheck.Run(context.Background(), cfg, d.check)
				require.NoError(t, err)
				return rep.Results[0]
			}
			res := run(d.flawed)
			require.Equal(t, d.verdict, res.Verdict, res.Reason)
			requireReason(t, res, d.reason)
			require.NotEmpty(t, res.Evidence)

			res = run(d.correct)
			require.Equal(t, idemcheck.Pass, res.Verdict, "without the flaw: %s", res.Reason)
		})
	}
}
