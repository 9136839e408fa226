package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idemcheck"
	"github.com/idemkeys/payments/internal/testkit"
)

// The end-to-end tier: the built idemcheck binary against the built API on
// each dialect, and against a Fiber v3 service built from its own module.

// TestBinaryHasNoProductDependency: installing idemcheck builds the
// standard library and its own check package, nothing else. `go version
// -m` lists every module linked into a binary as a "dep" line; there must
// be none, and the packages compiled in must be the command, its check
// package and the standard library.
func TestBinaryHasNoProductDependency(t *testing.T) {
	testkit.EndToEnd(t)
	bin := testkit.Binaries(t, "cmd/idemcheck")[0]
	out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "path\t"+testkit.Module+"cmd/idemcheck")
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		require.False(t, len(fields) > 0 && (fields[0] == "dep" || fields[0] == "=>"), "a module is linked into idemcheck: %s", line)
	}

	out, err = exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", testkit.Module+"cmd/idemcheck").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, []string{testkit.Module + "internal/idemcheck", testkit.Module + "cmd/idemcheck"}, strings.Fields(string(out)))
}

// runBinary runs idemcheck with args and returns its exit status, its
// report (written with -format json -o) and its standard error.
func runBinary(t *testing.T, bin string, args ...string) (int, *idemcheck.Report, string) {
	t.Helper()
	reportFile := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(bin, append(args, "-format", "json", "-o", reportFile)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	data, err := os.ReadFile(reportFile)
	require.NoError(t, err, stderr.String())
	var rep idemcheck.Report
	require.NoError(t, json.Unmarshal(data, &rep))
	t.Logf("idemcheck %s", rep.Summary())
	return code, &rep, stderr.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return "@" + p
}

// requireVerdicts checks every result against want, by verdict and reason.
func requireVerdicts(t *testing.T, rep *idemcheck.Report, want map[string]verdict) {
	t.Helper()
	require.Len(t, rep.Results, len(want))
	for _, res := range rep.Results {
		w, ok := want[res.ID]
		require.True(t, ok, res.ID)
		require.Equal(t, w.verdict, res.Verdict, "%s: %s", res.ID, res.Reason)
		require.Contains(t, strings.ToLower(res.Reason), strings.ToLower(w.reason), res.ID)
	}
}

type verdict struct {
	verdict idemcheck.Verdict
	reason  string
}

// On this API every check passes but those that cannot apply: no other
// method takes a key on either URL (PUT is no route there, so its 404 or
// 405 would say nothing of the key); an order cannot be made to fail with
// 5xx; a payment's body has one member, a string, which cannot be reordered
// or sent loosely equal; and the API stores no error it can be made to give
// (400, 502), so none is replayed to keep its Content-Type.
var (
	ordersNotApplicable   = []string{idemcheck.ReuseMethod, idemcheck.No5xxReplay, idemcheck.NoCrashLock, idemcheck.ReplayErrorType}
	paymentsNotApplicable = []string{idemcheck.ReuseLoose, idemcheck.ReuseMethod, idemcheck.FingerprintCanonical, idemcheck.ReplayErrorType}
)

// apiTTL is the IDEMPOTENCY_TTL of the API under test, and the -ttl given.
const apiTTL = 4 * time.Second

// orderBody is this API's order with a customer of its own per operation.
const orderBody = `{"customer_id":"cus_{{unique}}","currency":"BRL","items":[{"sku":"SKU-1","name":"Coffee","quantity":2,"unit_amount":1250}]}`

// TestThisAPIPassesEveryCheck runs the catalogue against the built API on
// each dialect, with the demo merchants and the in-process mock provider:
// on orders through the command, with every input it takes; on payments
// through the package, whose Prepare makes a fresh order for each
// operation (an order is paid once) and whose fault body is a provider
// that is down. Every check passes; the effects are then counted in the
// database and the provider's ledger.
func TestThisAPIPassesEveryCheck(t *testing.T) {
	testkit.EndToEnd(t)
	bins := testkit.Binaries(t, "cmd/api", "cmd/idemcheck")
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			// Keys expire after 4 s, so that expiry-race can be judged; the
			// other checks replay well within that.
			api := apptest.StartBinary(t, bins[0], testkit.DatabaseURL(t, dialect), apptest.Env("IDEMPOTENCY_TTL="+apiTTL.String()))

			t.Run("orders, by the command", func(t *testing.T) {
				code, rep, stderr := runBinary(t, bins[1],
					"-url", api.URL+"/v1/orders",
					"-H", "Authorization: Bearer sk_test_acme",
					"-H2", "Authorization: Bearer sk_test_globex",
					"-body", writeFile(t, "order.json", orderBody),
					"-body-variant", writeFile(t, "other.json", strings.Replace(orderBody, `"quantity":2`, `"quantity":3`, 1)),
					"-body-invalid", strings.Replace(orderBody, `"quantity":2`, `"quantity":0`, 1),
					"-url-variant", api.URL+"/v1/customers",
					"-effects-url", api.URL+"/v1/orders?customer_id=cus_{{unique}}&limit=100",
					"-effects-pointer", "/data",
					"-pause", "2s",
					"-ttl", apiTTL.String(),
					"-allow-effects")
				require.Equal(t, 0, code, stderr)
				require.Contains(t, stderr, "plan: at most 109 requests")
				for _, res := range rep.Results {
					want := idemcheck.Pass
					if slices.Contains(ordersNotApplicable, res.ID) {
						want = idemcheck.NotApplicable
					}
					require.Equal(t, want, res.Verdict, "%s: %s", res.ID, res.Reason)
				}
				require.Equal(t, rep.Plan.Requests, rep.Requests)
			})

			t.Run("payments, by the package", func(t *testing.T) {
				var prepared atomic.Int64
				newOrder := func() (string, error) {
					a, err := apptest.Do(apptest.Request{Method: "POST", URL: api.URL + "/v1/orders", APIKey: "sk_test_acme",
						Key: apptest.NewKey(), Body: strings.Replace(apptest.OrderBody, "cus_1", fmt.Sprintf("cus_prep_%d", prepared.Add(1)), 1)})
					if err != nil || a.Status != http.StatusCreated {
						return "", fmt.Errorf("create an order: %d %s %v", a.Status, a.Body, err)
					}
					var o struct{ ID string }
					return o.ID, json.Unmarshal(a.Body, &o)
				}
				cfg := idemcheck.Config{
					URL:          api.URL + "/v1/orders/{{order}}/payments",
					URLVariant:   api.URL + "/v1/orders/{{other}}/payments",
					Header:       http.Header{"Authorization": {"Bearer sk_test_acme"}},
					Header2:      http.Header{"Authorization": {"Bearer sk_test_globex"}},
					Body:         []byte(`{"payment_method":"pm_card_visa"}`),
					BodyVariant:  []byte(`{"payment_method":"pm_card_declined"}`),
					InvalidBody:  []byte(`{"payment_method":""}`),
					FaultBody:    []byte(`{"payment_method":"pm_fault_unavailable"}`),
					Pause:        2 * time.Second,
					TTL:          apiTTL,
					AllowEffects: true,
					Prepare: func(context.Context) (map[string]string, error) {
						order, err := newOrder()
						if err != nil {
							return nil, err
						}
						other, err := newOrder()
						return map[string]string{"order": order, "other": other}, err
					},
				}
				rep, err := idemcheck.Run(context.Background(), cfg)
				require.NoError(t, err)
				var text bytes.Buffer
				require.NoError(t, rep.WriteText(&text, true))
				t.Logf("payments:\n%s", text.String())
				for _, res := range rep.Results {
					want := idemcheck.Pass
					if slices.Contains(paymentsNotApplicable, res.ID) {
						want = idemcheck.NotApplicable
					}
					require.Equal(t, want, res.Verdict, "%s: %s", res.ID, res.Reason)
				}
				fault, _ := rep.Result(idemcheck.No5xxReplay)
				require.Contains(t, fault.Reason, "502 provider_unavailable, then 201", "the 5xx was provoked, and the retry resumed")

				// The effects, where they are: one payment per order at most,
				// and one charge per payment at the provider.
				require.Zero(t, api.Count(t, "SELECT count(*) FROM (SELECT order_id FROM payments GROUP BY order_id HAVING count(*) > 1) AS twice"))
				payments := api.Count(t, "SELECT count(*) FROM payments WHERE status = 'succeeded'")
				require.Positive(t, payments)
				for _, id := range paymentIDs(t, api) {
					charges := apptest.Ledger(t, api.URL+"/dev/provider/v1/charges?reference="+id)
					require.LessOrEqual(t, len(charges), 1, "payment %s charged once at most", id)
				}
			})

			// Every operation created one order at most per merchant, but
			// expiry-race's, whose key made its order again once expired.
			require.Zero(t, api.Count(t, "SELECT count(*) FROM (SELECT merchant_id, customer_id FROM orders GROUP BY merchant_id, customer_id HAVING count(*) > 2) AS thrice"))
			require.EqualValues(t, 1, api.Count(t, "SELECT count(*) FROM (SELECT merchant_id, customer_id FROM orders GROUP BY merchant_id, customer_id HAVING count(*) = 2) AS twice"))
		})
	}
}

// paymentIDs returns the id of every payment in the API's database.
func paymentIDs(t *testing.T, api *apptest.API) []string {
	t.Helper()
	db, err := database.Open(api.DatabaseURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer db.Close()
	var ids []string
	require.NoError(t, db.Raw("SELECT id FROM payments").Scan(&ids).Error)
	return ids
}

// TestFiberIdempotencyMiddleware runs the command against a Fiber v3
// service that uses Fiber's idempotency middleware with its defaults
// (tools/fiberpeer, a module of its own), and holds each verdict to what
// docs/guide/idemcheck.md reports.
func TestFiberIdempotencyMiddleware(t *testing.T) {
	testkit.EndToEnd(t)
	src := testkit.RepoFile(t, "tools/fiberpeer")
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		t.Skip("tools/ was deleted (a fork may delete the proof tooling whole)")
	}
	idemcheckBin := testkit.Binaries(t, "cmd/idemcheck")[0]
	// Its own module, with its own go.mod: the product module never
	// depends on Fiber.
	peer, err := testkit.BuildModule(t.Context(), t.TempDir(), "tools/fiberpeer")
	require.NoError(t, err)
	addr := testkit.FreeAddr(t)
	testkit.StartProcess(t, peer, addr)
	base := "http://" + addr

	const body = `{"customer_id":"c_{{unique}}","amount":1250}`
	code, rep, stderr := runBinary(t, idemcheckBin,
		"-url", base+"/v1/orders",
		"-key-header", "X-Idempotency-Key",
		"-H", "Authorization: Bearer sk_a",
		"-H2", "Authorization: Bearer sk_b",
		"-body", body,
		"-body-variant", `{"customer_id":"c_{{unique}}","amount":999}`,
		"-body-invalid", `{"customer_id":"c_{{unique}}","amount":0}`,
		"-body-5xx", `{"customer_id":"fail","amount":1250}`,
		"-url-variant", base+"/v1/customers",
		"-method-variant", "PUT",
		"-effects-url", base+"/v1/orders?customer_id=c_{{unique}}",
		"-effects-pointer", "/data",
		"-pause", "2s",
		"-allow-effects")
	require.Equal(t, 1, code, stderr)
	requireVerdicts(t, rep, fiberVerdicts)
}

// fiberVerdicts is what the catalogue finds in Fiber v3.1.0's idempotency
// middleware at its defaults; docs/guide/idemcheck.md shows the same.
var fiberVerdicts = map[string]verdict{
	idemcheck.KeyMissing:           {idemcheck.Fail, "the request without a key was executed"},
	idemcheck.KeyInvalid:           {idemcheck.Advice, "invalid keys were accepted: empty (201"},
	idemcheck.FirstRequest:         {idemcheck.Pass, "answered 201"},
	idemcheck.ReplayEffect:         {idemcheck.Pass, "the repeat names the same resource"},
	idemcheck.ReplaySame:           {idemcheck.Pass, "the same status, body and headers"},
	idemcheck.ReplayMarked:         {idemcheck.Advice, "the repeat is not marked as a replay"},
	idemcheck.ReuseBody:            {idemcheck.Fail, "the endpoint compares no fingerprint"},
	idemcheck.ReuseLoose:           {idemcheck.Fail, `the body with amount 1250 sent as "1250" got the original's answer (201 /v1/orders/`},
	idemcheck.ReusePath:            {idemcheck.Advice, "the original's result"},
	idemcheck.ReuseMethod:          {idemcheck.Advice, "the original's result"},
	idemcheck.FingerprintCanonical: {idemcheck.Pass, "replayed with whitespace added (201"},
	idemcheck.Concurrent:           {idemcheck.Pass, "30 copies at once: 201 × 30"},
	idemcheck.Credentials:          {idemcheck.Fail, "the other credentials got the first client's answer"},
	idemcheck.NoBurn:               {idemcheck.Advice, "the refusal was stored and replayed"},
	idemcheck.No5xxReplay:          {idemcheck.Advice, "the 503 is stored: the valid body under the key got it back byte for byte"},
	idemcheck.NoCrashLock:          {idemcheck.Pass, "the key was not locked after the 503"},
	idemcheck.ReplayErrorType:      {idemcheck.Pass, "the replayed 400 kept its content-type (application/problem+json). the replayed 503 kept its content-type"},
	idemcheck.PauseReplay:          {idemcheck.Pass, "names the same resource"},
	idemcheck.ExpiryRace:           {idemcheck.NotApplicable, "no -ttl"},
	idemcheck.Timing:               {idemcheck.Pass, "median"},
}
