package idemcheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idemcheck"
)

// config is every input the catalogue takes, for the test servers.
func config(srv *httptest.Server) idemcheck.Config {
	return idemcheck.Config{
		URL:            srv.URL + "/v1/orders",
		Header:         http.Header{"Authorization": {"Bearer sk_a"}},
		Header2:        http.Header{"Authorization": {"Bearer sk_b"}},
		Body:           []byte(`{"customer_id":"c_{{unique}}","amount":1250,"tip":0,"gift_wrap":1}`),
		BodyVariant:    []byte(`{"customer_id":"c_{{unique}}","amount":999}`),
		URLVariant:     srv.URL + "/v1/customers",
		MethodVariant:  http.MethodPut,
		InvalidBody:    []byte(`{"customer_id":"c_{{unique}}","amount":0}`),
		FaultBody:      []byte(`{"customer_id":"fail","amount":1250}`),
		EffectsURL:     srv.URL + "/v1/orders?customer_id=c_{{unique}}",
		EffectsPointer: "/data",
		Pause:          50 * time.Millisecond,
		Client:         srv.Client(),
		AllowEffects:   true,
	}
}

// counting counts the requests that reach h.
func counting(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	})
}

// requireReason checks that a result's reason says what it should (its
// sentences start with a capital).
func requireReason(t *testing.T, res idemcheck.Result, want string) {
	t.Helper()
	require.Contains(t, strings.ToLower(res.Reason), strings.ToLower(want), "%s (%s)", res.ID, res.Verdict)
}

// TestCarefulServerPassesEveryCheck is the catalogue against a server that
// keeps every rule: no check may fail or even advise, and the run sends
// exactly the requests its plan announced.
func TestCarefulServerPassesEveryCheck(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(counting(flawedServer(flaws{ttl: time.Second}), &served))
	t.Cleanup(srv.Close)
	cfg := config(srv)
	cfg.TTL = time.Second // its keys expire, and expiry-race is judged

	plan, err := idemcheck.PlanFor(cfg)
	require.NoError(t, err)
	rep, err := idemcheck.Run(context.Background(), cfg)
	require.NoError(t, err)
	for _, res := range rep.Results {
		want := idemcheck.Pass
		if res.ID == idemcheck.ReplayErrorType {
			want = idemcheck.NotApplicable // it stores no error to replay
		}
		require.Equal(t, want, res.Verdict, "%s: %s", res.ID, res.Reason)
	}
	require.Len(t, rep.Results, len(idemcheck.Checks()))
	require.False(t, rep.Failed())
	// The plan is what is sent, but for the five times no-crash-lock would
	// ask a key locked after a failure again: this one never locks.
	require.Equal(t, plan.Requests-5, rep.Requests, "the plan says what is sent")
	require.EqualValues(t, rep.Requests, served.Load(), "every request counted, none resent")
}

// TestNaiveServerVerdicts is the catalogue against the naive server: each
// mistake shows in the check that should catch it, for the stated reason,
// and the rules the naive server happens to keep pass.
func TestNaiveServerVerdicts(t *testing.T) {
	srv := httptest.NewServer(naiveServer())
	t.Cleanup(srv.Close)
	cfg := config(srv)
	cfg.TTL = 300 * time.Millisecond
	rep, err := idemcheck.Run(context.Background(), cfg)
	require.NoError(t, err)

	want := map[string]struct {
		verdict idemcheck.Verdict
		reason  string
	}{
		idemcheck.KeyMissing:           {idemcheck.Fail, "the request without a key was executed: answered 201"},
		idemcheck.KeyInvalid:           {idemcheck.Advice, "invalid keys were accepted: empty (201"},
		idemcheck.FirstRequest:         {idemcheck.Pass, "answered 201"},
		idemcheck.ReplayEffect:         {idemcheck.Pass, "the repeat names the same resource"},
		idemcheck.ReplaySame:           {idemcheck.Advice, `Location ""`},
		idemcheck.ReplayMarked:         {idemcheck.Advice, "the repeat is not marked as a replay"},
		idemcheck.ReuseBody:            {idemcheck.Fail, "given the original's answer, so the endpoint compares no fingerprint"},
		idemcheck.ReuseLoose:           {idemcheck.Fail, `the body with amount 1250 sent as "1250" got the original's answer (201 ord_`},
		idemcheck.ReusePath:            {idemcheck.Advice, "another path under a used key was answered 201"},
		idemcheck.ReuseMethod:          {idemcheck.Advice, "another method under a used key was answered 201"},
		idemcheck.FingerprintCanonical: {idemcheck.Pass, "replayed with whitespace added (201"},
		idemcheck.Concurrent:           {idemcheck.Fail, "different resources"},
		idemcheck.Credentials:          {idemcheck.Fail, "the other credentials got the first client's answer"},
		idemcheck.NoBurn:               {idemcheck.Advice, "the refusal was stored and replayed"},
		idemcheck.No5xxReplay:          {idemcheck.Advice, "the 503 is stored: the valid body under the key got it back byte for byte"},
		idemcheck.NoCrashLock:          {idemcheck.Pass, "the key was not locked after the 503"},
		idemcheck.ReplayErrorType:      {idemcheck.Advice, `the replayed 400 lost its content-type: "text/plain; charset=utf-8", first "application/problem+json"`},
		idemcheck.PauseReplay:          {idemcheck.Pass, "names the same resource"},
		idemcheck.ExpiryRace:           {idemcheck.NotJudged, "the key had not expired 830ms after its first answer"},
		idemcheck.Timing:               {idemcheck.Pass, "median"},
	}
	require.Len(t, rep.Results, len(want))
	for _, res := range rep.Results {
		w := want[res.ID]
		require.Equal(t, w.verdict, res.Verdict, "%s: %s", res.ID, res.Reason)
		requireReason(t, res, w.reason)
		require.NotEmpty(t, res.Evidence, "%s shows its evidence", res.ID)
	}
	require.True(t, rep.Failed())
	conc, _ := rep.Result(idemcheck.Concurrent)
	requireReason(t, conc, "new effects were counted for one key") // the effects URL saw the duplicates too
	requireReason(t, conc, "30 copies at once: 201 ×")             // and the tally stays with the failure
}

// TestRunSendsNothingUnlessAllowed: without AllowEffects, or with a plan
// over MaxRequests, Run refuses before the first request.
func TestRunSendsNothingUnlessAllowed(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(counting(carefulServer(), &served))
	t.Cleanup(srv.Close)

	cfg := config(srv)
	cfg.AllowEffects = false
	_, err := idemcheck.Run(context.Background(), cfg)
	require.ErrorIs(t, err, idemcheck.ErrNotAllowed)

	cfg = config(srv)
	cfg.MaxRequests = 10
	_, err = idemcheck.Run(context.Background(), cfg)
	require.ErrorIs(t, err, idemcheck.ErrNotAllowed)
	require.Contains(t, err.Error(), "over the limit of 10")
	require.Zero(t, served.Load())

	// Within its limit, a selection of checks runs.
	rep, err := idemcheck.Run(context.Background(), cfg, idemcheck.KeyMissing)
	require.NoError(t, err)
	require.Len(t, rep.Results, 1)
	require.Equal(t, idemcheck.Pass, rep.Results[0].Verdict, rep.Results[0].Reason)
	require.EqualValues(t, 6, served.Load(), "the first request with the effects before and after it, then key-missing's three")
}

// TestPlanCountsTheWorstCase: the plan counts the concurrent copies, the
// variants given and the effects reads, and says which checks do not apply.
func TestPlanCountsTheWorstCase(t *testing.T) {
	cfg := idemcheck.Config{URL: "http://127.0.0.1:1/v1/orders", Body: []byte(`{"a":1,"b":2}`), Concurrency: 10}
	p, err := idemcheck.PlanFor(cfg)
	require.NoError(t, err)
	// the first request 1, key-missing 1, key-invalid 4, replay 2, reuse 5
	// (the first, then 2 as "2" and 1 as true, each followed by the
	// original again), canonical 3, concurrent 10, pause 2, timing 6.
	require.Equal(t, 34, p.Writes)
	require.Zero(t, p.Reads)
	require.Equal(t, 34, p.WorstEffects)
	require.Equal(t, 7, p.Effects)
	na := map[string]string{}
	for _, c := range p.Checks {
		if !c.Applicable {
			na[c.ID] = c.Reason
		}
	}
	require.Equal(t, map[string]string{
		idemcheck.ReuseBody: "no -body-variant", idemcheck.ReusePath: "no -url-variant", idemcheck.ReuseMethod: "no -method-variant",
		idemcheck.Credentials: "no -H2", idemcheck.NoBurn: "no -body-invalid", idemcheck.No5xxReplay: "no -body-5xx",
		idemcheck.NoCrashLock: "no -body-5xx", idemcheck.ReplayErrorType: "no -body-invalid or -body-5xx",
		idemcheck.ExpiryRace: "no -ttl",
	}, na)

	cfg.EffectsURL, cfg.BodyVariant = "http://127.0.0.1:1/count", []byte(`{"a":2}`)
	p, err = idemcheck.PlanFor(cfg)
	require.NoError(t, err)
	// Reuse: another variant and the original again; effects reads: 2 each
	// for the first request, key-missing, key-invalid, replay and
	// concurrent, 4 for reuse (one before, one after each variant).
	require.Equal(t, 36, p.Writes)
	require.Equal(t, 14, p.Reads)

	_, err = idemcheck.PlanFor(idemcheck.Config{URL: "http://x/{{order}}/payments"})
	require.ErrorIs(t, err, idemcheck.ErrConfig, "a placeholder other than {{unique}} needs Prepare")
	_, err = idemcheck.PlanFor(idemcheck.Config{URL: "/v1/orders"})
	require.ErrorIs(t, err, idemcheck.ErrConfig)
	_, err = idemcheck.PlanFor(idemcheck.Config{URL: "http://x/v1/orders"}, "no-such-check")
	require.ErrorIs(t, err, idemcheck.ErrConfig)
}

// TestNeverFollowsRedirects: a redirect is judged, never followed, so the
// checker talks only to the URLs it was given.
func TestNeverFollowsRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(counting(carefulServer(), &elsewhere))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	cfg := config(srv)
	cfg.EffectsURL = ""
	_, err := idemcheck.Run(context.Background(), cfg, idemcheck.FirstRequest)
	require.ErrorIs(t, err, idemcheck.ErrPreflight)
	require.Contains(t, err.Error(), "was answered 307 "+other.URL+"/v1/orders: the checker follows no redirect")
	require.Zero(t, elsewhere.Load())
}

// TestNeverResendsOnABrokenConnection: net/http resends a request that
// carries an Idempotency-Key when a reused connection breaks before the
// answer, if it can rewind the body. The checker's requests cannot be
// rewound, so the server sees each of them once, even through a client
// that reuses connections.
func TestNeverResendsOnABrokenConnection(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) <= 2 { // the run's first request, and the check's
			w.Header().Set("Location", "/v1/orders/ord_1")
			w.WriteHeader(http.StatusCreated)
			return
		}
		// Read the whole request, then drop the connection unanswered.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	cfg := config(srv)
	cfg.EffectsURL = ""
	cfg.Client = srv.Client() // keeps connections alive
	rep, err := idemcheck.Run(context.Background(), cfg, idemcheck.ReplayEffect)
	require.NoError(t, err)
	require.Equal(t, idemcheck.Error, rep.Results[0].Verdict, rep.Results[0].Reason)
	requireReason(t, rep.Results[0], "the repeat got no answer")
	require.EqualValues(t, 3, served.Load(), "the run's first request, the check's and its repeat, each once")
	require.Equal(t, 3, rep.Requests)
}

// TestPrepareFillsPlaceholders: each operation gets its own values, so an
// endpoint whose operation can happen once per resource (paying an order)
// gets a fresh resource per check.
func TestPrepareFillsPlaceholders(t *testing.T) {
	srv := httptest.NewServer(carefulServer())
	t.Cleanup(srv.Close)
	var prepared atomic.Int64
	cfg := config(srv)
	cfg.URL = srv.URL + "/v1/{{collection}}"
	cfg.Prepare = func(context.Context) (map[string]string, error) {
		prepared.Add(1)
		return map[string]string{"collection": "orders"}, nil
	}
	plan, err := idemcheck.PlanFor(cfg)
	require.NoError(t, err)
	rep, err := idemcheck.Run(context.Background(), cfg)
	require.NoError(t, err)
	require.False(t, rep.Failed(), rep.Summary())
	require.EqualValues(t, plan.Operations, prepared.Load(), "one Prepare per operation")

	cfg.Prepare = func(context.Context) (map[string]string, error) { return map[string]string{}, nil }
	_, err = idemcheck.Run(context.Background(), cfg, idemcheck.FirstRequest)
	require.ErrorIs(t, err, idemcheck.ErrPreflight)
	require.Contains(t, err.Error(), "no value from Prepare for {{collection}}")
}

// TestReportFormats: the JSON report round-trips, and the JUnit report is
// XML whose counts are the verdicts'.
func TestReportFormats(t *testing.T) {
	srv := httptest.NewServer(naiveServer())
	t.Cleanup(srv.Close)
	cfg := config(srv)
	rep, err := idemcheck.Run(context.Background(), cfg, idemcheck.KeyMissing, idemcheck.FirstRequest, idemcheck.ReplayMarked, idemcheck.NoBurn)
	require.NoError(t, err)

	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var back idemcheck.Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Equal(t, rep.Results, back.Results)
	require.NotContains(t, js.String(), "sk_a", "credentials never reach a report")

	var ju bytes.Buffer
	require.NoError(t, rep.WriteJUnit(&ju))
	var suite struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	}
	require.NoError(t, xml.Unmarshal(ju.Bytes(), &suite))
	require.Equal(t, 4, suite.Tests)
	require.Equal(t, 1, suite.Failures)
	require.Equal(t, idemcheck.KeyMissing, suite.Cases[0].Name)
	require.NotNil(t, suite.Cases[0].Failure)

	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text, false))
	require.Regexp(t, `(?m)^key-missing +MUST +fail +The request without a key was executed`, text.String())
	require.Contains(t, text.String(), "1 pass, 1 fail, 2 advice, 0 not judged, 0 n/a, 0 error")
	require.True(t, strings.Contains(text.String(), "source: draft-07 §2.7"), text.String())
}

// echoing answers every request with what it received, as a debugging
// endpoint might: the request's URL and Authorization header in its body,
// and a Location that repeats the query.
func echoing() http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "http://"+r.Host+r.URL.RequestURI())
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": n.Add(1), "url": r.URL.String(), "authorization": r.Header.Get("Authorization")})
	})
}

// TestNoCredentialIsShown: a URL's user info and query values, and the
// credentials of -H and -H2, appear in no report, in no format, whether
// the endpoint echoes them or a transport error quotes them. The URL is
// still shown, redacted, so that a reader knows what was checked.
func TestNoCredentialIsShown(t *testing.T) {
	secrets := []string{"admin_user_name", "hunter2", "SECRET_TOKEN_1", "sk_live_secret_a", "sk_live_secret_b", "EFFECTS_TOKEN_2"}
	withSecrets := func(base string) idemcheck.Config {
		host := strings.TrimPrefix(base, "http://")
		cfg := idemcheck.Config{
			URL:          "http://admin_user_name:hunter2@" + host + "/v1/orders?api_key=SECRET_TOKEN_1&customer=c_{{unique}}",
			Header:       http.Header{"Authorization": {"Bearer sk_live_secret_a"}},
			Header2:      http.Header{"Authorization": {"Bearer sk_live_secret_b"}},
			Body:         []byte(`{"customer_id":"c_{{unique}}","amount":1250}`),
			EffectsURL:   "http://" + host + "/v1/orders?access_token=EFFECTS_TOKEN_2",
			Pause:        time.Millisecond,
			AllowEffects: true,
		}
		return cfg
	}
	requireNone := func(t *testing.T, rep *idemcheck.Report) string {
		t.Helper()
		var text, js, ju bytes.Buffer
		require.NoError(t, rep.WriteText(&text, true))
		require.NoError(t, rep.WriteJSON(&js))
		require.NoError(t, rep.WriteJUnit(&ju))
		for _, out := range []string{text.String(), js.String(), ju.String()} {
			for _, s := range secrets {
				require.NotContains(t, out, s)
			}
		}
		return text.String()
	}

	srv := httptest.NewServer(echoing())
	t.Cleanup(srv.Close)
	cfg := withSecrets(srv.URL)
	cfg.EffectsURL = "" // the echo counts nothing
	rep, err := idemcheck.Run(context.Background(), cfg)
	require.NoError(t, err)
	text := requireNone(t, rep)
	require.Contains(t, text, "http://REDACTED@127.0.0.1")
	require.Contains(t, text, "?api_key=REDACTED&customer=REDACTED")

	// A server that is down: net/http's error quotes the URL, and the run
	// stops with it.
	down := httptest.NewServer(echoing())
	down.Close()
	cfg = withSecrets(down.URL)
	cfg.EffectsURL = ""
	_, err = idemcheck.Run(context.Background(), cfg)
	require.ErrorIs(t, err, idemcheck.ErrPreflight)
	require.Contains(t, err.Error(), "connection refused")
	for _, s := range secrets {
		require.NotContains(t, err.Error(), s)
	}
	_, err = idemcheck.Run(context.Background(), withSecrets(down.URL))
	require.ErrorIs(t, err, idemcheck.ErrPreflight)
	require.Contains(t, err.Error(), "access_token=REDACTED")
	for _, s := range secrets {
		require.NotContains(t, err.Error(), s)
	}

	_, err = idemcheck.PlanFor(idemcheck.Config{URL: "ftp://admin_user_name:hunter2@host/?api_key=SECRET_TOKEN_1"})
	require.ErrorIs(t, err, idemcheck.ErrConfig)
	for _, s := range secrets {
		require.NotContains(t, err.Error(), s)
	}
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://api.example.com/v1/orders":                    "https://api.example.com/v1/orders",
		"https://user:pw@api.example.com:8443/v1?a=1&b=&c#tok": "https://REDACTED@api.example.com:8443/v1?a=REDACTED&b=REDACTED&REDACTED#REDACTED",
		"http://tok@host?x=1":                                  "http://REDACTED@host?x=REDACTED",
		"http://host/p/{{order}}?customer=c_{{unique}}":        "http://host/p/{{order}}?customer=REDACTED",
		"http://host/a@b":                                      "http://host/a@b",
		"not a url?key=v":                                      "not a url?key=REDACTED",
	} {
		require.Equal(t, want, idemcheck.RedactURL(raw), raw)
	}
}

// TestNotJudgedIsNeverAPass: when the input a check is given does not bring
// about what the check is about (an "invalid" body the endpoint accepts, a
// "5xx" body it answers 201), the check says so, in every format, and the
// run is incomplete rather than passed.
func TestNotJudgedIsNeverAPass(t *testing.T) {
	srv := httptest.NewServer(carefulServer())
	t.Cleanup(srv.Close)
	cfg := config(srv)
	cfg.InvalidBody, cfg.FaultBody = cfg.Body, cfg.Body
	rep, err := idemcheck.Run(context.Background(), cfg, idemcheck.NoBurn, idemcheck.No5xxReplay)
	require.NoError(t, err)
	for _, res := range rep.Results {
		require.Equal(t, idemcheck.NotJudged, res.Verdict, "%s: %s", res.ID, res.Reason)
	}
	requireReason(t, rep.Results[0], "the invalid body was answered 201")
	requireReason(t, rep.Results[0], "give -body-invalid a body the endpoint refuses")
	requireReason(t, rep.Results[1], "give -body-5xx a body the endpoint fails on")
	require.False(t, rep.Failed())
	require.True(t, rep.Incomplete())

	var text, js, ju bytes.Buffer
	require.NoError(t, rep.WriteText(&text, false))
	require.Regexp(t, `(?m)^no-burn +SHOULD +not judged +The invalid body was answered 201`, text.String())
	require.Contains(t, text.String(), "0 pass, 0 fail, 0 advice, 2 not judged, 0 n/a, 0 error")
	require.Contains(t, text.String(), "\nno-burn (SHOULD, not judged): ", "its evidence is shown")
	require.NoError(t, rep.WriteJSON(&js))
	require.Contains(t, js.String(), `"verdict": "not judged"`)
	require.NoError(t, rep.WriteJUnit(&ju))
	var suite struct {
		Skipped int `xml:"skipped,attr"`
		Cases   []struct {
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	}
	require.NoError(t, xml.Unmarshal(ju.Bytes(), &suite))
	require.Equal(t, 2, suite.Skipped)
	require.True(t, strings.HasPrefix(suite.Cases[0].Skipped.Message, "not judged: "), suite.Cases[0].Skipped.Message)
}
