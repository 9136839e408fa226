// Command demo walks through a lost provider response against a running API,
// printing every request and response: an order is created, its payment's
// provider answer is lost (202 processing), the reconciler (or a webhook)
// learns the outcome, a retry with the same Idempotency-Key gets the final
// 201, the key's record is shown, and a different body under that key is 422.
//
// Start the API first (make run), then:
//
//	make demo                     # or: go run ./tools/demo
//	API_URL=http://127.0.0.1:8080 API_KEY=sk_test_acme go run ./tools/demo
//
// It uses plain net/http rather than the client package, so that what goes
// over the wire is exactly what is printed. It exits non-zero when the server
// is unreachable or an answer is not what the step expects.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		os.Exit(1)
	}
}

// run is the whole program behind main, so tests can run it in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stdout)
	pollTimeout := fs.Duration("poll-timeout", time.Minute, "how long to poll the payment before giving up")
	pollInterval := fs.Duration("poll-interval", time.Second, "time between two polls of the payment")
	reqTimeout := fs.Duration("request-timeout", 2*time.Minute, "bound on one request (the lost-response payment takes PROVIDER_TIMEOUT)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: demo [flags]   (environment: API_URL [http://127.0.0.1:8080], API_KEY [sk_test_acme])")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	baseURL := strings.TrimRight(getenv("API_URL"), "/")
	if baseURL == "" {
		baseURL = "http://127.0.0.1:8080"
	}
	apiKey := getenv("API_KEY")
	if apiKey == "" {
		apiKey = "sk_test_acme"
	}
	d := &demo{
		out:         stdout,
		base:        baseURL,
		apiKey:      apiKey,
		http:        &http.Client{},
		reqTimeout:  *reqTimeout,
		pollEvery:   *pollInterval,
		pollTimeout: *pollTimeout,
	}
	return d.walk(ctx)
}

type demo struct {
	out         io.Writer
	base        string
	apiKey      string
	http        *http.Client
	reqTimeout  time.Duration
	pollEvery   time.Duration
	pollTimeout time.Duration
}

// exchange is one request and its answer.
type exchange struct {
	status int
	header http.Header
	body   []byte
}

func (e *exchange) json() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(e.body, &m)
	return m
}

func (e *exchange) str(field string) string {
	s, _ := e.json()[field].(string)
	return s
}

func (e *exchange) replayed() bool { return e.header.Get("Idempotent-Replayed") == "true" }

const orderBody = `{"customer_id":"cus_demo","currency":"BRL","items":[{"sku":"SKU-1","name":"Coffee","quantity":2,"unit_amount":1250}]}`

func (d *demo) walk(ctx context.Context) error {
	fmt.Fprintf(d.out, "Idempotency-key demo against %s (API key %s)\n", d.base, mask(d.apiKey))
	if err := d.reachable(ctx); err != nil {
		return err
	}
	fmt.Fprintln(d.out, "Every /v1 request below carries Authorization: Bearer <API_KEY>.")

	// 1. Create an order.
	d.step(1, "create an order",
		"every POST carries an Idempotency-Key the client makes up, one per logical operation; the order is created once, however often it is sent.")
	orderKey := "demo-order-" + rand.Text()
	o, err := d.do(ctx, http.MethodPost, "/v1/orders", orderKey, orderBody)
	if err != nil {
		return err
	}
	if o.status != http.StatusCreated || !strings.HasPrefix(o.str("id"), "ord_") {
		return unexpected(1, "201 with an order", o)
	}
	orderID := o.str("id")

	// 2. Pay it; the provider's answer is lost.
	d.step(2, "pay with pm_fault_lost_response",
		"the provider makes the charge but its answer never arrives; after PROVIDER_TIMEOUT the API does not guess: it answers 202 processing with a Location to follow.")
	payKey := "demo-pay-" + rand.Text()
	payPath := "/v1/orders/" + orderID + "/payments"
	payBody := `{"payment_method":"pm_fault_lost_response"}`
	fmt.Fprintln(d.out, "  (this request takes about PROVIDER_TIMEOUT, 5s by default: the API is waiting for an answer that will not come)")
	p, err := d.do(ctx, http.MethodPost, payPath, payKey, payBody)
	if err != nil {
		return err
	}
	paymentID := p.str("id")
	switch {
	case p.status == http.StatusAccepted && p.str("status") == "processing" && strings.HasPrefix(paymentID, "pay_"):
		if loc := p.header.Get("Location"); loc != "/v1/payments/"+paymentID {
			return fmt.Errorf("step 2: the 202 should carry Location /v1/payments/%s, got %q", paymentID, loc)
		}
	case p.status == http.StatusCreated && p.str("status") == "succeeded" && strings.HasPrefix(paymentID, "pay_"):
		fmt.Fprintln(d.out, "  NOTE: the API answered 201, not 202: the provider's webhook (or a retry within the request) "+
			"resolved the payment while the API was still waiting for the provider. With `make run` the in-process provider holds its webhooks "+
			"back by PROVIDER_WEBHOOK_DELAY (10s), so the 202 shows. Continuing: there is nothing left to reconcile.")
	default:
		return unexpected(2, "202 processing (or 201 succeeded if a webhook won the race)", p)
	}

	// 3. Poll until the outcome is known.
	d.step(3, "poll GET /v1/payments/"+paymentID,
		"the reconciler (every RECONCILE_INTERVAL) asks the provider what became of the charge under the payment's own provider key, or the provider's webhook tells; either way the payment leaves processing.")
	final, err := d.poll(ctx, "/v1/payments/"+paymentID)
	if err != nil {
		return err
	}
	if final.str("status") != "succeeded" {
		return unexpected(3, "the payment to end succeeded", final)
	}

	// 4. Retry with the same key.
	d.step(4, "retry the payment with the SAME key",
		"what a client does after a 202 or a timeout: the same key and body never charge twice; they get the final answer, the same payment.")
	r, err := d.do(ctx, http.MethodPost, payPath, payKey, payBody)
	if err != nil {
		return err
	}
	if r.status != http.StatusCreated || r.str("id") != paymentID || r.str("status") != "succeeded" {
		return unexpected(4, "201 succeeded for "+paymentID, r)
	}
	if r.replayed() {
		fmt.Fprintln(d.out, "  -> Idempotent-Replayed: true: the record under this key was already finished (by the reconciler or the webhook); the stored 201 came back and nothing ran again.")
	} else {
		fmt.Fprintln(d.out, "  -> no Idempotent-Replayed: the record was still open, so this retry finished it, resuming the same payment under the same provider key (no second charge).")
	}

	// 5. Inspect the key.
	d.step(5, "inspect the payment's key",
		"GET /v1/idempotency-keys/{key} shows what the API keeps under a key: state, recovery point, fingerprint and the stored answer every repeat replays.")
	k, err := d.do(ctx, http.MethodGet, "/v1/idempotency-keys/"+url.PathEscape(payKey), "", "")
	if err != nil {
		return err
	}
	resp, _ := k.json()["response"].(map[string]any)
	if k.status != http.StatusOK || k.str("state") != "completed" || resp == nil || resp["status"] != float64(http.StatusCreated) {
		return unexpected(5, "200 with state completed and a stored 201", k)
	}

	// 6. Same key, different body.
	d.step(6, "same key, different body",
		"a key names one request: reusing it for another body (here another payment method) is 422 idempotency_key_reused, and nothing runs.")
	m, err := d.do(ctx, http.MethodPost, payPath, payKey, `{"payment_method":"pm_card_visa"}`)
	if err != nil {
		return err
	}
	if m.status != http.StatusUnprocessableEntity || m.str("code") != "idempotency_key_reused" {
		return unexpected(6, "422 idempotency_key_reused", m)
	}

	fmt.Fprintf(d.out, "\nDone: order %s, one payment %s; every answer under key %s agreed with it.\n", orderID, paymentID, payKey)
	return nil
}

// reachable fails fast, with a clear message, when nothing answers.
func (d *demo) reachable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("bad API_URL %q: %w", d.base, err)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return fmt.Errorf("server unreachable at %s (start it with `make run`, or set API_URL): %w", d.base, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("server at %s answered GET /healthz with %d, not 200", d.base, resp.StatusCode)
	}
	return nil
}

func (d *demo) step(n int, title, why string) {
	fmt.Fprintf(d.out, "\n=== Step %d/6: %s ===\n", n, title)
	fmt.Fprintf(d.out, "  %s\n\n", why)
}

// do sends one request and prints it and its answer.
func (d *demo) do(ctx context.Context, method, path, key, body string) (*exchange, error) {
	fmt.Fprintf(d.out, "> %s %s\n", method, path)
	if key != "" {
		fmt.Fprintf(d.out, "> Idempotency-Key: %s\n", key)
	}
	if body != "" {
		printBody(d.out, "> ", []byte(body))
	}
	start := time.Now()
	e, err := d.send(ctx, method, path, key, body)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(d.out, "< %d %s   (%s)\n", e.status, http.StatusText(e.status), elapsed(time.Since(start)))
	for _, h := range []string{"Idempotent-Replayed", "Location", "Retry-After"} {
		if v := e.header.Get(h); v != "" {
			fmt.Fprintf(d.out, "< %s: %s\n", h, v)
		}
	}
	printBody(d.out, "< ", e.body)
	return e, nil
}

func (d *demo) send(ctx context.Context, method, path, key, body string) (*exchange, error) {
	ctx, cancel := context.WithTimeout(ctx, d.reqTimeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.apiKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return &exchange{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// poll reads the payment every pollEvery, one line a poll, until it leaves
// processing; it prints the last answer in full.
func (d *demo) poll(ctx context.Context, path string) (*exchange, error) {
	deadline := time.Now().Add(d.pollTimeout)
	start := time.Now()
	for n := 1; ; n++ {
		e, err := d.send(ctx, http.MethodGet, path, "", "")
		if err != nil {
			return nil, err
		}
		status := e.str("status")
		fmt.Fprintf(d.out, "  poll %d (t+%s): GET %s -> %d, \"status\": %q\n", n, elapsed(time.Since(start)), path, e.status, status)
		if e.status != http.StatusOK {
			return nil, unexpected(3, "200 from GET "+path, e)
		}
		if status != "processing" {
			fmt.Fprintf(d.out, "\n> GET %s\n< %d %s\n", path, e.status, http.StatusText(e.status))
			printBody(d.out, "< ", e.body)
			return e, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("step 3: payment still processing after %s; is the reconciler running (RECONCILE_INTERVAL)?", d.pollTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d.pollEvery):
		}
	}
}

// printBody prints a JSON body indented, anything else as it is.
func printBody(w io.Writer, prefix string, body []byte) {
	if len(bytes.TrimSpace(body)) == 0 {
		return
	}
	var buf bytes.Buffer
	if json.Indent(&buf, body, prefix, "  ") == nil {
		fmt.Fprintf(w, "%s%s\n", prefix, buf.String())
		return
	}
	for _, line := range strings.Split(strings.TrimRight(string(body), "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", prefix, line)
	}
}

func unexpected(step int, want string, e *exchange) error {
	body := strings.TrimSpace(string(e.body))
	if len(body) > 500 {
		body = body[:500] + "…"
	}
	return fmt.Errorf("step %d: expected %s, got %d %s: %s", step, want, e.status, http.StatusText(e.status), body)
}

// elapsed is d in milliseconds under a second, else in seconds.
func elapsed(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// mask shows the start of an API key only, as logs should.
func mask(key string) string {
	if len(key) <= 8 {
		return "…"
	}
	return key[:8] + "…"
}
