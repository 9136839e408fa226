package app_test

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestDemoDrawsTheLifecycle pays on /demo with a method whose answer the
// provider loses, and reads the picture the page draws beside the form:
// the key reserved, its recovery points, the provider call, the unknown
// outcome, the reconciler settling it, and the repeat answered from the
// record, marked as a replay; then "send again" is one more replay. The
// provider's ledger holds one charge.
func TestDemoDrawsTheLifecycle(t *testing.T) {
	testkit.EndToEnd(t)
	t.Parallel()
	ctx := newBrowser(t, 60*time.Second)
	// The webhook comes late, as a real provider's does: the reconciler,
	// every 200 ms, is what learns the outcome.
	w := apptest.Start(t, testkit.DatabaseURL(t, database.Postgres),
		apptest.WithProvider(provider.Config{DuplicateWebhookRate: -1, WebhookDelay: 20 * time.Second}),
		apptest.Env("RECONCILE_INTERVAL=200ms", "PROVIDER_TIMEOUT=1s"))

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(w.URL+"/demo")))
	picture := func() string {
		return evaluate[string](t, ctx, `'phase=' + document.body.dataset.phase + '\nstatus: ' +
			document.getElementById('status').textContent + '\npicture:\n' +
			[...document.querySelectorAll('#lifecycle li')].map(li => li.dataset.step + ': ' + li.innerText).join('\n') +
			'\nrequests:\n' + document.getElementById('log').innerText`)
	}
	require.True(t, evaluate[bool](t, ctx, `document.getElementById('link-swagger').getAttribute('href') === '/swagger/index.html'`))
	require.True(t, evaluate[bool](t, ctx, `document.getElementById('link-rules').getAttribute('href') === '#rules' && !!document.getElementById('rules')`))

	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#payment-method"), provider.MethodFaultLostResponse),
		chromedp.Click(chromedp.CSS("#pay"))))
	waitFor(t, ctx, 30*time.Second, "the checkout ends", `document.body.dataset.phase === 'done'`, picture)

	steps := func() []string {
		return evaluate[[]string](t, ctx, `[...document.querySelectorAll('#lifecycle li')].map(li => li.dataset.step)`)
	}
	drawn := steps()
	t.Logf("the picture:\n%s", picture())
	// In the order they happen: the order (Atomic: stored with its
	// record), then the payment.
	require.Equal(t, []string{"request", "stored", "answer"}, drawn[:3], picture())
	payment := drawn[3:]
	order := []string{"request", "reserved", "provider-call", "unknown", "answer", "reconciled", "request", "replayed"}
	require.Equal(t, order, without(payment, "point"), picture())
	points := evaluate[[]string](t, ctx, `[...document.querySelectorAll('#lifecycle li[data-step="point"]')].map(li => li.dataset.point)`)
	// The page reads the record as it goes: it may miss the short-lived
	// payment_created (the intent follows at once), never the intent
	// (held while the provider does not answer) nor the unknown outcome.
	require.Equal(t, []string{"payment_calling", "payment_unknown"}, without(points, "payment_created"), picture())
	require.True(t, evaluate[bool](t, ctx, `(() => {
		const mark = document.querySelector('#lifecycle li[data-step="replayed"][data-replayed="true"] mark.replayed');
		return !!mark && mark.offsetParent !== null && mark.innerText.toLowerCase() === 'replayed' })()`), "the replay is marked, visibly\n%s", picture())
	require.True(t, evaluate[bool](t, ctx, `!!document.querySelector('#log mark.replayed[data-replayed="true"]')`), "the request log marks the replay too\n%s", picture())
	require.Equal(t, "succeeded", evaluate[string](t, ctx, `document.getElementById('payment-status').textContent`), picture())

	// The same request again: answered from the record, charged nothing.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#send-again"))))
	waitFor(t, ctx, 10*time.Second, "the second replay is drawn",
		`document.querySelectorAll('#lifecycle li[data-step="replayed"]').length === 2`, picture)
	saveScreenshot(t, ctx, chromedp.CSS("main"), "demo-lifecycle.png")

	paymentID := evaluate[string](t, ctx, `document.getElementById('payment-id').textContent`)
	require.Len(t, w.Charges(t, paymentID), 1, "one charge at the provider\n%s", picture())
}

// without returns steps but name: the recovery points, which interleave
// with the other steps as the page's reads happen to see them, and are
// checked on their own.
func without(steps []string, name string) []string {
	var out []string
	for _, s := range steps {
		if s != name {
			out = append(out, s)
		}
	}
	return out
}

// TestSwaggerUIKeepsAKey: Try it out fills the Idempotency-Key of POST
// /v1/orders with a fresh key, which the document does not hold (no
// default, no example every reader would share); a second Execute sends it
// again and is the replay; "New key" makes another, and the next Execute is
// a new order.
func TestSwaggerUIKeepsAKey(t *testing.T) {
	testkit.EndToEnd(t)
	t.Parallel()
	ctx := newBrowser(t, 60*time.Second)
	api := apptest.Start(t, testkit.DatabaseURL(t, database.SQLite))

	doc := apptest.Call(t, "GET", api.URL+"/swagger/doc.json", "", "", "")
	require.Equal(t, 200, doc.Status)
	var spec struct {
		Paths map[string]map[string]struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(doc.Body, &spec))
	keyed := 0
	for path, ops := range spec.Paths {
		for method, op := range ops {
			for _, p := range op.Parameters {
				if p["name"] != "Idempotency-Key" {
					continue
				}
				keyed++
				schema, _ := p["schema"].(map[string]any)
				for _, field := range []string{"example", "examples", "default"} {
					require.NotContains(t, p, field, "%s %s: the document gives every reader one key", method, path)
					require.NotContains(t, schema, field, "%s %s: the document gives every reader one key", method, path)
				}
			}
		}
	}
	require.Positive(t, keyed)

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(api.URL+"/swagger/index.html")))
	pageText := func() string { return evaluate[string](t, ctx, `document.body.innerText.slice(0, 2000)`) }
	waitFor(t, ctx, 20*time.Second, "POST /v1/orders is listed", `!!(`+findCreateOrder+`)`, pageText)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.auth-wrapper .btn.authorize`))))
	waitFor(t, ctx, 10*time.Second, "the Authorize dialog opens", `!!document.querySelector('.auth-container input')`, pageText)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`.auth-container input`), "sk_test_acme"),
		chromedp.Click(chromedp.CSS(`.auth-container .auth-btn-wrapper .btn.authorize`)),
		chromedp.Click(chromedp.CSS(`.dialog-ux .close-modal`))))

	evaluate[bool](t, ctx, `(() => { const b = `+findCreateOrder+`;
		(b.querySelector('.opblock-summary-control') || b.querySelector('.opblock-summary')).click(); return true })()`)
	opText := func() string { return evaluate[string](t, ctx, `(`+findCreateOrder+`).innerText`) }
	waitFor(t, ctx, 10*time.Second, "the operation opens", `!!(`+findCreateOrder+`).querySelector('.try-out__btn')`, opText)
	keyInput := `(` + findCreateOrder + `).querySelector('tr[data-param-name="Idempotency-Key"] input')`
	require.False(t, evaluate[bool](t, ctx, `!!`+keyInput+` && `+keyInput+`.value !== ''`), "a key before Try it out")

	evaluate[bool](t, ctx, `((`+findCreateOrder+`).querySelector('.try-out__btn').click(), true)`)
	waitFor(t, ctx, 10*time.Second, "Try it out fills a key", `!!`+keyInput+` && `+keyInput+`.value !== ''`, opText)
	first := evaluate[string](t, ctx, keyInput+`.value`)
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`), first)

	liveStatus := `(() => { const c = (` + findCreateOrder + `).querySelector('.live-responses-table .response .response-col_status'); return c ? c.innerText.trim() : '' })()`
	execute := func(what string) string {
		t.Helper()
		evaluate[bool](t, ctx, `(() => { const c = (`+findCreateOrder+`).querySelector('.btn-clear'); if (c) c.click(); return true })()`)
		waitFor(t, ctx, 5*time.Second, "the last answer is cleared", liveStatus+` === ''`, opText)
		evaluate[bool](t, ctx, `((`+findCreateOrder+`).querySelector('.btn.execute').click(), true)`)
		waitFor(t, ctx, 15*time.Second, what, liveStatus+` !== ''`, opText)
		return evaluate[string](t, ctx, `(`+findCreateOrder+`).querySelector('.live-responses-table').innerText`)
	}
	created := execute("the first answer")
	require.Contains(t, created, "201", created)
	require.NotContains(t, created, "idempotent-replayed", created)
	replayed := execute("the second answer")
	require.Contains(t, replayed, "idempotent-replayed: true", replayed)
	require.Equal(t, first, evaluate[string](t, ctx, keyInput+`.value`), "the key is kept")
	saveScreenshot(t, ctx, chromedp.JSPath(`(`+findCreateOrder+`).querySelector('.parameters-container')`), "swagger-kept-key.png")
	saveScreenshot(t, ctx, chromedp.JSPath(`(`+findCreateOrder+`).querySelector('.live-responses-table')`), "swagger-kept-key-replay.png")

	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[data-new-idempotency-key]`))))
	waitFor(t, ctx, 5*time.Second, "New key makes another", keyInput+`.value !== '`+first+`' && `+keyInput+`.value !== ''`, opText)
	fresh := execute("the answer under the new key")
	require.Contains(t, fresh, "201", fresh)
	require.NotContains(t, fresh, "idempotent-replayed", fresh)
	require.EqualValues(t, 2, api.Count(t, `SELECT count(*) FROM orders o JOIN merchants m ON m.id = o.merchant_id WHERE m.name = 'acme'`),
		"two keys, two orders; the repeat made none")
}
