package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idemcheck"
)

// anything is an endpoint without idempotency at all: every POST creates.
func anything(served *atomic.Int64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/v1/orders/"+strings.Repeat("o", int(n)))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"` + strings.Repeat("o", int(n)) + `"}`))
	}))
}

// tableRows returns the first three columns of each line of a text
// report, single-spaced.
func tableRows(report string) []string {
	var rows []string
	for _, line := range strings.Split(report, "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			rows = append(rows, strings.Join(f[:3], " "))
		}
	}
	return rows
}

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestSafeByDefault: the plan is printed first, and nothing is sent
// without -allow-effects or over -max-requests.
func TestSafeByDefault(t *testing.T) {
	var served atomic.Int64
	srv := anything(&served)
	t.Cleanup(srv.Close)
	base := []string{"-url", srv.URL + "/v1/orders", "-body", `{"a":1,"b":2}`}

	code, _, stderr := runArgs(base...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "plan: at most 54 requests (54 to the endpoint, 0 reads of the effects URL) under 9 new keys.")
	require.Contains(t, stderr, "a broken one could make up to 54")
	require.Contains(t, stderr, "nothing sent: add -allow-effects")

	code, _, stderr = runArgs(append(base, "-plan")...)
	require.Equal(t, exitOK, code, stderr)

	code, _, stderr = runArgs(append(base, "-allow-effects", "-max-requests", "20")...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "the plan is over -max-requests 20")
	require.Zero(t, served.Load())
}

// TestExitStatusAndFormats: a failed check makes exit status 1, and each
// format carries the verdicts.
func TestExitStatusAndFormats(t *testing.T) {
	var served atomic.Int64
	srv := anything(&served)
	t.Cleanup(srv.Close)
	base := []string{"-url", srv.URL + "/v1/orders", "-body", `{"a":1}`, "-allow-effects", "-checks", "key-missing,first-request"}

	code, stdout, stderr := runArgs(base...)
	require.Equal(t, exitFailed, code, stderr)
	require.Contains(t, tableRows(stdout), "key-missing MUST fail")
	require.Contains(t, tableRows(stdout), "first-request SHOULD pass")
	require.Contains(t, stderr, "done: 3 requests, 1 pass, 1 fail")
	require.EqualValues(t, 3, served.Load(), "exactly the planned requests")

	code, stdout, _ = runArgs(append(base, "-format", "junit")...)
	require.Equal(t, exitFailed, code)
	require.Contains(t, stdout, `<testsuite name="idemcheck POST `+srv.URL+`/v1/orders" tests="2" failures="1"`)

	code, _, stderr = runArgs(append(base[:len(base)-2], "-checks", "first-request", "-format", "json")...)
	require.Equal(t, exitOK, code, stderr)

	// A check not judged is no pass: its own exit status.
	code, stdout, stderr = runArgs(append(base[:len(base)-2], "-checks", "no-burn", "-body-invalid", `{"a":0}`)...)
	require.Equal(t, exitNotJudged, code, stderr)
	require.Contains(t, tableRows(stdout), "no-burn SHOULD not")

	code, _, stderr = runArgs(append(base, "-format", "yaml")...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "-format must be text, json or junit")
	code, _, stderr = runArgs(append(base[:len(base)-2], "-checks", "no-such")...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, `no check "no-such"`)
	// The command names itself once; the package's errors do not repeat it.
	require.Equal(t, "idemcheck: bad configuration: no check \"no-such\"\n", stderr)
}

// TestList prints every check with its rule, level and source.
func TestList(t *testing.T) {
	code, stdout, _ := runArgs("-list")
	require.Equal(t, exitOK, code)
	for _, c := range idemcheck.Checks() {
		require.Contains(t, stdout, c.ID+" ("+string(c.Level)+")\n  "+c.Rule+"\n  source: "+c.Source)
	}
}

// TestNoCredentialOnTheTerminal: the command's own lines (the plan's
// header, a transport error in the report) show the URL without its user
// info and query values, and never the credentials of -H.
func TestNoCredentialOnTheTerminal(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	host := strings.TrimPrefix(down.URL, "http://")
	code, stdout, stderr := runArgs("-url", "http://admin_user_name:hunter2@"+host+"/v1/orders?api_key=SECRET_TOKEN_1",
		"-H", "Authorization: Bearer sk_live_secret_a", "-body", `{"a":1}`, "-checks", "first-request", "-allow-effects", "-v")
	require.Equal(t, exitUsage, code, stderr)
	for _, secret := range []string{"admin_user_name", "hunter2", "SECRET_TOKEN_1", "sk_live_secret_a"} {
		require.NotContains(t, stdout, secret)
		require.NotContains(t, stderr, secret)
	}
	require.Contains(t, stderr, "idemcheck POST http://REDACTED@"+host+"/v1/orders?api_key=REDACTED\n")
	require.Contains(t, stderr, "connection refused")
}

// TestUsageErrors: the mistakes a new user makes stop before the first
// request, with exit status 2 and a message naming the flag.
func TestUsageErrors(t *testing.T) {
	var served atomic.Int64
	srv := anything(&served)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	order := filepath.Join(dir, "order.json")
	require.NoError(t, os.WriteFile(order, []byte(`{"a":1}`), 0o600))
	empty := filepath.Join(dir, "empty.json")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	base := []string{"-url", srv.URL + "/v1/orders", "-H", "Authorization: Bearer sk_a", "-allow-effects"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-body", order}, `-body: "` + order + `" names a file, and would be sent as text; write @` + order},
		{[]string{"-body", `{"a":1}`, "-body-variant", order}, "-body-variant: \"" + order + "\" names a file"},
		{[]string{"-body", ""}, "-body: the body is empty"},
		{[]string{"-body", "@" + empty}, "-body: @" + empty + " is empty"},
		{[]string{"-body", `{"a":1}`, "-H2", "Authorization: Bearer sk_a"}, "the other credentials (-H2) are the same as -H's"},
		{[]string{"-body", `{"a":1}`, "-final-status", "402,500"}, "final status 500: only 402 and 409"},
		{[]string{"-body", `{"a":1}`, "-final-status", "declined"}, "want statuses such as 402,409"},
		{[]string{"-body", `{"a":1}`, "-lock-timeout", "24h"}, "the lock timeout 24h0m0s is over the 5m0s the checker waits at most"},
		{[]string{"-body", `{"a":1}`, "-ttl", "24h"}, "the TTL 24h0m0s is over the 5m0s the checker waits at most: shorten the endpoint's TTL in the test environment"},
		{[]string{"-body", `{"a":1}`, "-ttl", "2s"}, "the pause 3s must be shorter than the TTL 2s"},
	} {
		code, _, stderr := runArgs(append(base, tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.want, tc.args)
	}
	require.Zero(t, served.Load(), "nothing sent")
}

// TestStopsAfterTheFirstRequest: a run whose first request fails says once
// what to fix and exits 2; a server that is down is one line, not one per
// check.
func TestStopsAfterTheFirstRequest(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	code, stdout, stderr := runArgs("-url", down.URL+"/v1/orders", "-body", `{"a":1}`, "-allow-effects")
	require.Equal(t, exitUsage, code)
	require.Empty(t, stdout, "no report without evidence")
	require.Equal(t, 1, strings.Count(stderr, "connection refused"), stderr)
	require.Contains(t, stderr, "idemcheck: stopped after the first request: POST "+down.URL+"/v1/orders (a new key, the -body) got no answer")

	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	code, _, stderr = runArgs("-url", srv.URL+"/v1/order", "-body", `{"a":1}`, "-allow-effects")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "was answered 404 (404 page not found): nothing answers this URL; check -url")
	require.EqualValues(t, 1, served.Load())
}
