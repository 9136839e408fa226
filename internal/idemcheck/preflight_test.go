package idemcheck_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idemcheck"
)

// TestPreflightStopsTheRun: a run whose first request is not answered 2xx
// (or a declared final status) stops there, saying what to fix, instead of
// judging the endpoint by answers to a request it refuses: a wrong URL,
// credentials or body used to make every invalid key look refused and
// still sent thirty concurrent copies.
func TestPreflightStopsTheRun(t *testing.T) {
	down := httptest.NewServer(carefulServer())
	down.Close()
	for _, tc := range []struct {
		name   string
		change func(cfg *idemcheck.Config, srv *httptest.Server)
		want   string
	}{
		{"the server is down", func(cfg *idemcheck.Config, _ *httptest.Server) {
			cfg.URL, cfg.EffectsURL = down.URL+"/v1/orders", ""
		}, "got no answer"},
		{"a URL nothing answers", func(cfg *idemcheck.Config, srv *httptest.Server) {
			cfg.URL = srv.URL + "/v1/order"
		}, "was answered 404 not_found ("},
		{"wrong credentials", func(cfg *idemcheck.Config, _ *httptest.Server) {
			cfg.Header = http.Header{"Authorization": {"Bearer sk_typo"}}
		}, "the credentials were refused; check -H"},
		{"no body", func(cfg *idemcheck.Config, _ *httptest.Server) {
			cfg.Body = nil
		}, "(a new key, no body) was answered 400 validation_failed"},
		{"a body the endpoint refuses", func(cfg *idemcheck.Config, _ *httptest.Server) {
			cfg.Body = []byte(`order.json`)
		}, "give -body a body it accepts"},
		{"an outcome not declared", func(cfg *idemcheck.Config, _ *httptest.Server) {
			cfg.Body = []byte(`{"customer_id":"declined","amount":1250}`)
		}, "declare it with -final-status 402"},
		{"an effects URL that counts something else", func(cfg *idemcheck.Config, srv *httptest.Server) {
			cfg.EffectsURL = srv.URL + "/v1/orders?customer_id=someone_else"
		}, "the effects URL counted no new effect (0 before and after)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var served atomic.Int64
			srv := httptest.NewServer(counting(carefulServer(), &served))
			t.Cleanup(srv.Close)
			cfg := config(srv)
			tc.change(&cfg, srv)
			rep, err := idemcheck.Run(context.Background(), cfg)
			require.ErrorIs(t, err, idemcheck.ErrPreflight)
			require.Nil(t, rep, "no verdict without evidence")
			require.Contains(t, err.Error(), tc.want)
			require.LessOrEqual(t, served.Load(), int64(3), "the first request and its effects reads, nothing more")
		})
	}
}

// TestDeclaredFinalStatusIsAnAnswer: an endpoint whose own stored outcome
// for the body is 402 (a declined payment) is checked like one that
// answers 201 once the status is declared, and keeps every rule that
// applies to it.
func TestDeclaredFinalStatusIsAnAnswer(t *testing.T) {
	srv := httptest.NewServer(carefulServer())
	t.Cleanup(srv.Close)
	cfg := config(srv)
	cfg.Body = []byte(`{"customer_id":"declined","amount":1250,"ref":"{{unique}}"}`)
	cfg.BodyVariant = []byte(`{"customer_id":"declined","amount":999,"ref":"{{unique}}"}`)
	cfg.EffectsURL = "" // a decline creates no order
	cfg.FinalStatus = []int{http.StatusPaymentRequired}
	rep, err := idemcheck.Run(context.Background(), cfg)
	require.NoError(t, err)
	for _, res := range rep.Results {
		require.Contains(t, []idemcheck.Verdict{idemcheck.Pass, idemcheck.NotApplicable}, res.Verdict, "%s: %s", res.ID, res.Reason)
	}
	first, _ := rep.Result(idemcheck.FirstRequest)
	requireReason(t, first, "answered 402 payment_declined")
}

// TestInvalidKeysAreNewEachRun: a second run against an endpoint that
// validates no key, but stored the first run's, finds the same: the
// invalid keys are new each run, so "already used" cannot pass for
// "refused". The empty key cannot be new: an answer of a used key to it is
// advice, not a pass.
func TestInvalidKeysAreNewEachRun(t *testing.T) {
	srv := httptest.NewServer(flawedServer(flaws{acceptAnyKey: true}))
	t.Cleanup(srv.Close)
	cfg := config(srv)
	for run := 1; run <= 2; run++ {
		rep, err := idemcheck.Run(context.Background(), cfg, idemcheck.KeyInvalid)
		require.NoError(t, err)
		res := rep.Results[0]
		require.Equal(t, idemcheck.Advice, res.Verdict, "run %d: %s", run, res.Reason)
		requireReason(t, res, "invalid keys were accepted")
		requireReason(t, res, "256 characters (201")
		if run == 2 {
			requireReason(t, res, "the empty key was answered 422 idempotency_key_reused, as a key used before")
		}
	}
}

// TestOtherCredentialsRefused: other credentials the endpoint refuses
// (a typo in -H2) never make the credentials check pass: the endpoint was
// never asked as another client.
func TestOtherCredentialsRefused(t *testing.T) {
	srv := httptest.NewServer(flawedServer(flaws{sharedKeys: true}))
	t.Cleanup(srv.Close)
	cfg := config(srv)
	rep, err := idemcheck.Run(context.Background(), cfg, idemcheck.Credentials)
	require.NoError(t, err)
	require.Equal(t, idemcheck.Fail, rep.Results[0].Verdict, "the keys are shared: %s", rep.Results[0].Reason)

	cfg.Header2 = http.Header{"Authorization": {"Bearer sk_typo"}}
	rep, err = idemcheck.Run(context.Background(), cfg, idemcheck.Credentials)
	require.NoError(t, err)
	require.Equal(t, idemcheck.Error, rep.Results[0].Verdict, rep.Results[0].Reason)
	requireReason(t, rep.Results[0], "the other credentials (-H2) were refused with 401 unauthorized")
	require.True(t, rep.Failed())

	cfg.Header2 = http.Header{"Authorization": {"Bearer sk_a"}}
	_, err = idemcheck.Run(context.Background(), cfg, idemcheck.Credentials)
	require.ErrorIs(t, err, idemcheck.ErrConfig)
	require.Contains(t, err.Error(), "the other credentials (-H2) are the same as -H's")
}
