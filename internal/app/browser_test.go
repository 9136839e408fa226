package app_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// chromiumPath is where Debian's chromium package puts the browser; .ci/run
// installs it when it is missing.
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts a headless Chromium with a fresh profile for the test
// and returns a context of one tab in it, bounded by within. Without
// Chromium the test is skipped, or fails under CI=true.
func newBrowser(t *testing.T, within time.Duration) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		testkit.MissingService(t, "chromium", fmt.Errorf("chromium not installed: %w", err))
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox, // tests run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		// The machine has no way out: without these Chromium keeps
		// trying to reach Google's hosts.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1600),
	)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), within)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	// Cleanups run last in, first out: the browser is gone before the
	// profile folder that t.TempDir made is removed.
	t.Cleanup(func() {
		_ = chromedp.Cancel(tabCtx)
		cancelTab()
		cancelAlloc()
		cancelTimeout()
	})
	require.NoError(t, chromedp.Do(tabCtx), "start chromium")
	return tabCtx
}

// evaluate runs a JavaScript expression in the page and returns its value.
func evaluate[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	require.NoError(t, err, js)
	return v
}

// waitFor polls a JavaScript condition in the page until it is truthy. On a
// timeout it fails with what the page says, via describe.
func waitFor(t *testing.T, ctx context.Context, within time.Duration, what, js string, describe func() string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](js,
		chromedp.WithPollingInterval(20*time.Millisecond),
		chromedp.WithPollingTimeout(within)))
	if err != nil {
		extra := ""
		if describe != nil {
			extra = "\n" + describe()
		}
		t.Fatalf("%s: %v%s", what, err, extra)
	}
}

// findCreateOrder is the Swagger UI block of POST /v1/orders, found by its
// path rather than by the element id Swagger UI derives from the tag and
// operation id, which change with the annotations.
const findCreateOrder = `[...document.querySelectorAll('.opblock-post')].find(b => {
	const p = b.querySelector('.opblock-summary-path');
	return p && (p.dataset.path || p.textContent.trim()) === '/v1/orders';
})`

// TestSwaggerUIInBrowser uses Swagger UI 5 on the served OpenAPI 3.1
// document as a new user would: Authorize with the bare API key (the scheme
// is HTTP bearer, so the UI adds "Bearer "), then Try it out on POST
// /v1/orders twice under one Idempotency-Key: a 201, then the replay with
// idempotent-replayed: true. The 422 row shows its own example,
// idempotency_key_reused, not another status's.
func TestSwaggerUIInBrowser(t *testing.T) {
	testkit.EndToEnd(t)
	t.Parallel()
	ctx := newBrowser(t, 60*time.Second)
	dbURL := testkit.DatabaseURL(t, database.SQLite)
	api := apptest.Start(t, dbURL)

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(api.URL+"/swagger/index.html")))
	pageText := func() string { return evaluate[string](t, ctx, `document.body.innerText.slice(0, 2000)`) }
	waitFor(t, ctx, 20*time.Second, "POST /v1/orders is listed", `!!(`+findCreateOrder+`)`, pageText)
	require.NotContains(t, pageText(), "Unable to render this definition")

	// Authorize with the bare key.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.auth-wrapper .btn.authorize`))))
	waitFor(t, ctx, 10*time.Second, "the Authorize dialog opens", `!!document.querySelector('.auth-container input')`, pageText)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`.auth-container input`), "sk_test_acme"),
		chromedp.Click(chromedp.CSS(`.auth-container .auth-btn-wrapper .btn.authorize`))))
	waitFor(t, ctx, 10*time.Second, "the key is taken", `!!document.querySelector('.auth-container .btn.modal-btn.auth.button')`, pageText)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.dialog-ux .close-modal`))))

	// Open the operation, as a reader would.
	evaluate[bool](t, ctx, `(() => { const b = `+findCreateOrder+`;
		(b.querySelector('.opblock-summary-control') || b.querySelector('.opblock-summary')).click(); return true })()`)
	waitFor(t, ctx, 10*time.Second, "the operation opens", `!!(`+findCreateOrder+`).querySelector('.opblock-body')`, pageText)
	opText := func() string { return evaluate[string](t, ctx, `(`+findCreateOrder+`).innerText`) }
	shown := func(what, js string) {
		t.Helper()
		waitFor(t, ctx, 10*time.Second, what, `(() => { const b = `+findCreateOrder+`; return !!(`+js+`) })()`, opText)
	}
	shown("the Idempotency-Key header parameter is shown, required",
		`b.querySelector('tr[data-param-name="Idempotency-Key"][data-param-in="header"] .parameter__name.required')`)
	shown("the 409 response is shown", `b.querySelector('.responses-table tr.response[data-code="409"]')`)
	shown("the 422 response is shown", `b.querySelector('.responses-table tr.response[data-code="422"]')`)
	row422 := evaluate[string](t, ctx, `(`+findCreateOrder+`).querySelector('.responses-table tr.response[data-code="422"]').innerText`)
	require.Contains(t, row422, `"code": "idempotency_key_reused"`, "the 422 row shows its own example")
	require.Contains(t, row422, `"status": 422`)
	require.NotContains(t, row422, "validation_failed")
	saveScreenshot(t, ctx, chromedp.JSPath(findCreateOrder), "swagger-create-order.png")

	// Try it out, twice with one key.
	evaluate[bool](t, ctx, `((`+findCreateOrder+`).querySelector('.try-out__btn').click(), true)`)
	shown("the form opens", `b.querySelector('tr[data-param-name="Idempotency-Key"] input:not([disabled])')`)
	key := "swagger-" + apptest.NewKey()
	// Typed as React sees typing: the native setter, then an input event.
	evaluate[bool](t, ctx, `(() => {
		const input = (`+findCreateOrder+`).querySelector('tr[data-param-name="Idempotency-Key"] input');
		Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(input, '`+key+`');
		input.dispatchEvent(new Event('input', { bubbles: true }));
		return true })()`)
	// The UI takes the value after a debounce: wait until its state has it.
	waitFor(t, ctx, 10*time.Second, "the UI holds the key", `(JSON.stringify(window.ui.getState().get('spec')) || '').includes('`+key+`')`, opText)
	liveStatus := `(() => { const c = (` + findCreateOrder + `).querySelector('.live-responses-table .response .response-col_status'); return c ? c.innerText.trim() : '' })()`
	execute := func(what string) string {
		t.Helper()
		evaluate[bool](t, ctx, `((`+findCreateOrder+`).querySelector('.btn.execute').click(), true)`)
		waitFor(t, ctx, 15*time.Second, what, liveStatus+` !== ''`, opText)
		return evaluate[string](t, ctx, `(`+findCreateOrder+`).querySelector('.live-responses-table').innerText`)
	}
	first := execute("the first answer is shown")
	require.Contains(t, first, "201", first)
	require.NotContains(t, first, "idempotent-replayed", first)
	// The second Execute replaces the live answer: clear it first, so that
	// the wait sees the new one.
	evaluate[bool](t, ctx, `(() => { const c = (`+findCreateOrder+`).querySelector('.btn-clear'); if (c) c.click(); return true })()`)
	second := execute("the second answer is shown")
	require.Contains(t, second, "201", second)
	require.Contains(t, second, "idempotent-replayed: true", second)
	require.EqualValues(t, 1, api.Count(t, `SELECT count(*) FROM orders o JOIN merchants m ON m.id = o.merchant_id WHERE m.name = 'acme'`),
		"one order for the two executions")
	saveScreenshot(t, ctx, chromedp.JSPath(findCreateOrder), "swagger-try-it-out-replay.png")
}

// saveScreenshot saves a PNG of the element that sel finds, in t.TempDir,
// or in SCREENSHOT_DIR when it is set (t.TempDir goes with the test), and
// logs where.
func saveScreenshot[S chromedp.Selectable](t *testing.T, ctx context.Context, sel S, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.Screenshot(sel))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "a PNG")
	dir := os.Getenv("SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, png, 0o600))
	t.Logf("screenshot: %s", path)
}

// TestDemoCheckoutInBrowser drives the /demo page the way an impatient user
// does: a double click, then a reload while the payment is in flight. The
// page must resume with the keys it saved, and the database and the
// provider's ledger must show one order and one charge.
func TestDemoCheckoutInBrowser(t *testing.T) {
	testkit.EndToEnd(t)
	t.Parallel()
	ctx := newBrowser(t, 50*time.Second)
	// pm_fault_slow charges at once and answers SlowDelay later: the
	// window in which the reload lands. The short lock timeout bounds the
	// case where the reload cuts the request while the server is still
	// reserving its key: the record is then left executing as by a crash,
	// and only a retry after the lock timeout recovers it (seen under load).
	w := apptest.Start(t, testkit.DatabaseURL(t, database.Postgres), apptest.WithProvider(provider.Config{SlowDelay: time.Second, DuplicateWebhookRate: -1}), apptest.Env("RECONCILE_INTERVAL=200ms", "IDEMPOTENCY_LOCK_TIMEOUT=3s", "PROVIDER_TIMEOUT=2s"))

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(w.URL+"/demo")))
	pageState := func() string {
		return evaluate[string](t, ctx, `'phase=' + document.body.dataset.phase + '\nstatus: ' +
			document.getElementById('status').textContent + '\nrequests:\n' + document.getElementById('log').innerText +
			'\nsaved: ' + sessionStorage.getItem('idemkeys.demo.checkout')`)
	}
	require.Equal(t, "sk_test_acme", evaluate[string](t, ctx, `document.getElementById('api-key').value`))
	require.NoError(t, chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#payment-method"), "pm_fault_slow")))

	require.NoError(t, chromedp.Do(ctx, chromedp.DoubleClick(chromedp.CSS("#pay"))))
	// The browser drops a click on a disabled button; a submit from script
	// does not, and must be harmless too.
	evaluate[bool](t, ctx, `(document.getElementById('checkout').requestSubmit(), true)`)
	require.True(t, evaluate[bool](t, ctx, `document.getElementById('pay').disabled`), "the button is disabled in flight")

	waitFor(t, ctx, 10*time.Second, "the payment is sent", `document.body.dataset.phase === 'paying'`, pageState)
	before := pageState()
	require.Contains(t, before, "Click ignored: this checkout is already in flight", "the second submit reached the page")
	require.Equal(t, 1, strings.Count(before, "POST /v1/orders #"), "one order request before the reload\n%s", before)
	orderKey := evaluate[string](t, ctx, `document.getElementById('order-key').textContent`)
	paymentKey := evaluate[string](t, ctx, `document.getElementById('payment-key').textContent`)
	orderID := evaluate[string](t, ctx, `JSON.parse(sessionStorage.getItem('idemkeys.demo.checkout')).order.id`)
	require.NotEmpty(t, orderKey)
	require.NotEmpty(t, paymentKey)

	// Reload while the provider still holds the answer.
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload()))
	waitFor(t, ctx, 30*time.Second, "the page resumes and finishes", `document.body.dataset.phase === 'done'`, pageState)

	state := pageState()
	t.Logf("the page after the checkout:\n%s", state)
	require.Contains(t, state, "Resuming the saved checkout", "the reload resumed the saved operation")
	require.Equal(t, orderKey, evaluate[string](t, ctx, `document.getElementById('order-key').textContent`), state)
	require.Equal(t, paymentKey, evaluate[string](t, ctx, `document.getElementById('payment-key').textContent`), state)
	require.Equal(t, "succeeded", evaluate[string](t, ctx, `document.getElementById('payment-status').textContent`), state)
	require.Equal(t, orderID, evaluate[string](t, ctx, `document.getElementById('order-id').textContent`), state)
	require.Equal(t, "paid", evaluate[string](t, ctx, `document.getElementById('order-status').textContent`), state)
	require.Nil(t, evaluate[*string](t, ctx, `sessionStorage.getItem('idemkeys.demo.checkout')`), "the finished operation is forgotten")
	paymentID := evaluate[string](t, ctx, `document.getElementById('payment-id').textContent`)
	saveScreenshot(t, ctx, chromedp.CSS("main"), "demo-checkout-done.png")

	require.EqualValues(t, 1, w.Count(t, `SELECT count(*) FROM orders o JOIN merchants m ON m.id = o.merchant_id WHERE m.name = 'acme'`),
		"one order for the merchant\n%s", state)
	require.EqualValues(t, 1, w.Count(t, `SELECT count(*) FROM payments WHERE order_id = ?`, orderID), state)
	require.Len(t, w.Charges(t, paymentID), 1, "one charge at the provider\n%s", state)
}

// TestDemoPageServed checks, without a browser, that /demo needs no API key
// and carries its script inline.
func TestDemoPageServed(t *testing.T) {
	t.Parallel()
	dbURL := testkit.DatabaseURL(t, database.SQLite)
	api := apptest.Start(t, dbURL)

	a := apptest.Call(t, "GET", api.URL+"/demo", "", "", "")
	require.Equal(t, 200, a.Status, string(a.Body))
	require.Equal(t, "text/html; charset=utf-8", a.Header.Get("Content-Type"))
	require.Contains(t, string(a.Body), "Create order and pay")
	require.Contains(t, string(a.Body), "crypto.randomUUID()", "the script is inlined")
	require.NotContains(t, string(a.Body), "{{", "the template is rendered")
}
