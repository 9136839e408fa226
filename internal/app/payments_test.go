package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

func TestPaymentMethodsEndToEnd(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			// Webhooks arrive late here, so that an unknown outcome is seen
			// as a 202 and the reconciler is what resolves it.
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithProvider(provider.Config{SlowDelay: time.Second, DuplicateWebhookRate: 1, WebhookDelay: 3 * time.Second}), apptest.Env("PROVIDER_TIMEOUT=300ms", "RECONCILE_INTERVAL=100ms"))

			t.Run("visa succeeds once and pays the order", func(t *testing.T) {
				order := w.CreateOrder(t, "sk_test_acme")
				key := apptest.NewKey()
				a := w.Pay(t, order, key, "pm_card_visa")
				require.Equal(t, 201, a.Status, string(a.Body))
				p := a.JSON(t)
				require.Equal(t, "succeeded", p["status"])
				require.EqualValues(t, 2500, p["amount"])
				require.NotEmpty(t, p["provider_charge_id"])
				require.Len(t, w.Charges(t, p["id"].(string)), 1)

				o := apptest.Call(t, "GET", w.URL+"/v1/orders/"+order, "sk_test_acme", "", "").JSON(t)
				require.Equal(t, "paid", o["status"])

				again := w.Pay(t, order, key, "pm_card_visa")
				require.Equal(t, 201, again.Status)
				require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
				require.Equal(t, a.Body, again.Body)

				paid := w.Pay(t, order, apptest.NewKey(), "pm_card_visa")
				require.Equal(t, 409, paid.Status)
				require.Equal(t, "order_already_paid", paid.JSON(t)["code"])
				require.Len(t, w.Charges(t, p["id"].(string)), 1)
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE order_id = ?", order))
			})

			for _, tc := range []struct{ method, code string }{
				{"pm_card_declined", "card_declined"},
				{"pm_card_insufficient_funds", "insufficient_funds"},
			} {
				t.Run(tc.method+" is declined and the order can be paid again", func(t *testing.T) {
					order := w.CreateOrder(t, "sk_test_acme")
					key := apptest.NewKey()
					a := w.Pay(t, order, key, tc.method)
					require.Equal(t, 402, a.Status, string(a.Body))
					prob := a.JSON(t)
					require.Equal(t, "payment_declined", prob["code"])
					require.Equal(t, tc.code, prob["decline_code"])
					paymentID := prob["payment_id"].(string)
					require.Len(t, w.Charges(t, paymentID), 1)

					again := w.Pay(t, order, key, tc.method)
					require.Equal(t, 402, again.Status)
					require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
					require.Equal(t, a.Body, again.Body)

					o := apptest.Call(t, "GET", w.URL+"/v1/orders/"+order, "sk_test_acme", "", "").JSON(t)
					require.Equal(t, "pending_payment", o["status"])
					require.Equal(t, 201, w.Pay(t, order, apptest.NewKey(), "pm_card_visa").Status)
				})
			}

			t.Run("unavailable: 502, nothing charged, the same key resumes", func(t *testing.T) {
				order := w.CreateOrder(t, "sk_test_acme")
				key := apptest.NewKey()
				a := w.Pay(t, order, key, "pm_fault_unavailable")
				require.Equal(t, 502, a.Status, string(a.Body))
				require.Equal(t, "provider_unavailable", a.JSON(t)["code"])
				require.EqualValues(t, 0, w.Count(t, `SELECT count(*) FROM payments WHERE order_id = ? AND status = 'succeeded'`, order))

				again := w.Pay(t, order, key, "pm_fault_unavailable")
				require.Equal(t, 201, again.Status, string(again.Body))
				p := again.JSON(t)
				require.Len(t, w.Charges(t, p["id"].(string)), 1)
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE order_id = ?", order), "the retry resumed the same payment")
			})

			for _, method := range []string{"pm_fault_lost_response", "pm_fault_slow"} {
				t.Run(method+": 202, then resolved to one charge", func(t *testing.T) {
					order := w.CreateOrder(t, "sk_test_acme")
					key := apptest.NewKey()
					a := w.Pay(t, order, key, method)
					require.Equal(t, 202, a.Status, string(a.Body))
					p := a.JSON(t)
					require.Equal(t, "processing", p["status"])
					paymentID := p["id"].(string)
					require.Equal(t, "/v1/payments/"+paymentID, a.Header.Get("Location"))

					testkit.Eventually(t, 10*time.Second, "payment resolved", func() bool {
						got := apptest.Call(t, "GET", w.URL+"/v1/payments/"+paymentID, "sk_test_acme", "", "")
						return got.JSON(t)["status"] == "succeeded"
					})
					final := w.Pay(t, order, key, method)
					require.Equal(t, 201, final.Status, string(final.Body))
					require.Equal(t, "succeeded", final.JSON(t)["status"])
					require.Len(t, w.Charges(t, paymentID), 1)
					o := apptest.Call(t, "GET", w.URL+"/v1/orders/"+order, "sk_test_acme", "", "").JSON(t)
					require.Equal(t, "paid", o["status"])
				})
			}

			t.Run("other merchant sees nothing", func(t *testing.T) {
				order := w.CreateOrder(t, "sk_test_acme")
				a := apptest.Call(t, "POST", w.URL+"/v1/orders/"+order+"/payments", "sk_test_globex", apptest.NewKey(), `{"payment_method":"pm_card_visa"}`)
				require.Equal(t, 404, a.Status)
				p := w.Pay(t, order, apptest.NewKey(), "pm_card_visa").JSON(t)
				require.Equal(t, 404, apptest.Call(t, "GET", w.URL+"/v1/payments/"+p["id"].(string), "sk_test_globex", "", "").Status)
			})

			t.Run("bad input changes nothing", func(t *testing.T) {
				order := w.CreateOrder(t, "sk_test_acme")
				for _, body := range []string{`{}`, `{"payment_method":""}`, `{"payment_method":5}`, `{"payment_method":"pm_card_visa","x":1}`, `{"payment_method":`} {
					a := apptest.Call(t, "POST", w.URL+"/v1/orders/"+order+"/payments", "sk_test_acme", apptest.NewKey(), body)
					require.Equal(t, 400, a.Status, body)
					require.Equal(t, "validation_failed", a.JSON(t)["code"])
				}
				require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM payments WHERE order_id = ?", order))
			})

			t.Run("each webhook event applies once", func(t *testing.T) {
				// DuplicateWebhookRate 1: the provider sent every event twice.
				testkit.Eventually(t, 10*time.Second, "webhooks delivered", func() bool {
					return w.Count(t, "SELECT count(*) FROM webhook_events") > 0
				})
				charges := len(w.Provider.Server.Charges())
				testkit.Eventually(t, 10*time.Second, "one inbox row per charge event", func() bool {
					return w.Count(t, "SELECT count(*) FROM webhook_events WHERE type LIKE 'charge.%'") == int64(charges)
				})
			})
		})
	}
}

// TestWebhookResolvesFirst turns the reconciler off: a provider webhook is
// what resolves an unknown outcome, before or after the API's own answer.
func TestWebhookResolvesFirst(t *testing.T) {
	w := apptest.Start(t, testkit.DatabaseURL(t, database.Postgres), apptest.WithProvider(provider.Config{SlowDelay: time.Second, DuplicateWebhookRate: 1}), apptest.Env("PROVIDER_TIMEOUT=300ms", "RECONCILE_INTERVAL=1h"))
	order := w.CreateOrder(t, "sk_test_acme")
	key := apptest.NewKey()
	a := w.Pay(t, order, key, "pm_fault_slow")
	require.Contains(t, []int{201, 202}, a.Status, string(a.Body))
	paymentID := a.JSON(t)["id"].(string)
	testkit.Eventually(t, 10*time.Second, "the webhook resolved the payment", func() bool {
		return apptest.Call(t, "GET", w.URL+"/v1/payments/"+paymentID, "sk_test_acme", "", "").JSON(t)["status"] == "succeeded"
	})
	final := w.Pay(t, order, key, "pm_fault_slow")
	require.Equal(t, 201, final.Status)
	require.Len(t, w.Charges(t, paymentID), 1)
	testkit.Eventually(t, 10*time.Second, "both copies of the event delivered", func() bool {
		return w.Count(t, "SELECT count(*) FROM webhook_events") == 1
	})
}

func TestRefunds(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithProvider(provider.Config{}))
			order := w.CreateOrder(t, "sk_test_acme")
			p := w.Pay(t, order, apptest.NewKey(), "pm_card_visa").JSON(t)
			paymentID := p["id"].(string)
			refund := func(key, body string) apptest.Answer {
				return apptest.Call(t, "POST", w.URL+"/v1/payments/"+paymentID+"/refunds", "sk_test_acme", key, body)
			}

			key := apptest.NewKey()
			first := refund(key, `{"amount":1000}`)
			require.Equal(t, 201, first.Status, string(first.Body))
			r := first.JSON(t)
			require.Equal(t, "refund", r["object"])
			require.Equal(t, "succeeded", r["status"])
			require.EqualValues(t, 1000, r["amount"])
			replay := refund(key, `{"amount":1000}`)
			require.Equal(t, first.Body, replay.Body)
			require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))

			got := apptest.Call(t, "GET", w.URL+"/v1/payments/"+paymentID, "sk_test_acme", "", "").JSON(t)
			require.EqualValues(t, 1000, got["amount_refunded"])
			require.Equal(t, "succeeded", got["status"])

			tooMuch := refund(apptest.NewKey(), `{"amount":1501}`)
			require.Equal(t, 409, tooMuch.Status)
			require.Equal(t, "refund_exceeds_payment", tooMuch.JSON(t)["code"])

			rest := refund(apptest.NewKey(), ``)
			require.Equal(t, 201, rest.Status, string(rest.Body))
			require.EqualValues(t, 1500, rest.JSON(t)["amount"])
			require.Equal(t, 409, refund(apptest.NewKey(), `{"amount":1}`).Status)

			got = apptest.Call(t, "GET", w.URL+"/v1/payments/"+paymentID, "sk_test_acme", "", "").JSON(t)
			require.EqualValues(t, 2500, got["amount_refunded"])
			refunds := apptest.Ledger(t, w.Provider.URL+"/v1/refunds?reference="+r["id"].(string))
			require.Len(t, refunds, 1)
			require.EqualValues(t, 2, w.Count(t, "SELECT count(*) FROM refunds WHERE payment_id = ? AND status = 'succeeded'", paymentID))

			// Concurrent refunds on a fresh payment never exceed it.
			order = w.CreateOrder(t, "sk_test_acme")
			paymentID = w.Pay(t, order, apptest.NewKey(), "pm_card_visa").JSON(t)["id"].(string)
			var wg sync.WaitGroup
			for range 10 {
				wg.Go(func() { refund(apptest.NewKey(), `{"amount":1000}`) })
			}
			wg.Wait()
			require.EqualValues(t, 2, w.Count(t, "SELECT count(*) FROM refunds WHERE payment_id = ? AND status = 'succeeded'", paymentID))
			got = apptest.Call(t, "GET", w.URL+"/v1/payments/"+paymentID, "sk_test_acme", "", "").JSON(t)
			require.EqualValues(t, 2000, got["amount_refunded"])
		})
	}
}

func TestWebhookSignature(t *testing.T) {
	w := apptest.Start(t, testkit.DatabaseURL(t, database.SQLite), apptest.WithProvider(provider.Config{DuplicateWebhookRate: -1}))
	body := []byte(`{"id":"evt_forged","type":"charge.succeeded","created":1,"data":{"object":{"id":"ch_x","object":"charge","status":"succeeded","amount":2500,"currency":"BRL","reference":"pay_x","idempotency_key":"pay_x"}}}`)
	post := func(sig string) int {
		var header []string
		if sig != "" {
			header = []string{"Provider-Signature", sig}
		}
		return apptest.Call(t, "POST", w.URL+"/v1/webhooks/provider", "", "", string(body), header...).Status
	}
	require.Equal(t, 401, post(""))
	require.Equal(t, 401, post(provider.Sign("wrong_secret", time.Now(), body)))
	require.Equal(t, 401, post(provider.Sign("whsec_test", time.Now().Add(-6*time.Minute), body)))
	require.Equal(t, 401, post(provider.Sign("whsec_test", time.Now().Add(6*time.Minute), body)))
	require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM webhook_events"))
	require.Equal(t, 200, post(provider.Sign("whsec_test", time.Now(), body)))
	require.Equal(t, 200, post(provider.Sign("whsec_test", time.Now(), body)))
	// Signed, so acknowledged; about no payment of ours, so not recorded
	// (only an event the provider confirms goes into the inbox).
	require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM webhook_events WHERE event_id = 'evt_forged'"))
}

func TestConcurrentIdenticalPaymentsChargeOnce(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithProvider(provider.Config{SlowDelay: 300 * time.Millisecond}), apptest.Env("IDEMPOTENCY_WAIT=10s"))
			for _, method := range []string{"pm_card_visa", "pm_fault_slow"} {
				order := w.CreateOrder(t, "sk_test_acme")
				key := apptest.NewKey()
				var wg sync.WaitGroup
				answers := make([]apptest.Answer, 30)
				for i := range answers {
					wg.Go(func() { answers[i] = w.Pay(t, order, key, method) })
				}
				wg.Wait()
				var paymentID string
				for _, a := range answers {
					require.Contains(t, []int{201, 202}, a.Status, string(a.Body))
					id := a.JSON(t)["id"].(string)
					if paymentID == "" {
						paymentID = id
					}
					require.Equal(t, paymentID, id, "every answer names the one payment")
				}
				require.Len(t, w.Charges(t, paymentID), 1)
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE order_id = ?", order))
			}
		})
	}
}

// TestCrashAtEveryRecoveryPoint kills the API process at each point of a
// payment where a crash can leave something behind, then restarts it and
// retries with the same key: the retry takes the abandoned record over,
// resumes the same payment, and the provider's ledger shows exactly one
// charge. A gate in front of the provider holds the charge where the test
// kills: after the intent was committed and before the call reached the
// provider, or after the provider charged and before its answer arrived.
// (After that, nothing is left to crash into: the final phase stores the
// answer in the transaction that settles the payment.)
func TestCrashAtEveryRecoveryPoint(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, _ := apptest.Binaries(t)
	for _, dialect := range testkit.Dialects {
		for _, point := range []struct {
			name  string
			after bool
		}{{"before the charge", false}, {"after the charge", true}} {
			t.Run(string(dialect)+"/"+point.name, func(t *testing.T) {
				t.Parallel()
				dbURL := testkit.DatabaseURL(t, dialect)
				prov, err := provider.StartInProcess(context.Background(), provider.Config{})
				require.NoError(t, err)
				t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
				gate := &apptest.Gate{Upstream: prov.URL, After: point.after}
				w := apptest.StartBinary(t, apiBin, dbURL, apptest.Env("PROVIDER_URL="+gate.Start(t),
					"IDEMPOTENCY_LOCK_TIMEOUT=2s", "PROVIDER_TIMEOUT=1500ms", "PENDING_CANCEL_AFTER=1h",
					"RECONCILE_INTERVAL=1h", "IDEMPOTENCY_WAIT=200ms"))

				order := w.CreateOrder(t, "sk_test_acme")
				key := apptest.NewKey()
				go func() {
					// The connection dies with the process: no answer.
					_, _ = apptest.Do(apptest.Request{Method: "POST", URL: w.URL + "/v1/orders/" + order + "/payments",
						APIKey: "sk_test_acme", Key: key, Body: `{"payment_method":"pm_card_visa"}`})
				}()
				select {
				case <-gate.Arrived():
				case <-time.After(30 * time.Second):
					t.Fatal("the charge never reached the gate")
				}
				w.Process.Kill()
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE order_id = ? AND status = 'pending'", order))
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM outside_calls WHERE state = 'calling'"),
					"killed with its intent open")

				require.NoError(t, w.Process.Start(time.Minute))
				var retry apptest.Answer
				testkit.Eventually(t, 30*time.Second, "a retry gets the final answer", func() bool {
					retry = w.Pay(t, order, key, "pm_card_visa")
					return retry.Status == 201
				})
				paymentID := retry.JSON(t)["id"].(string)
				gate.Release() // the dead process's call, if it still hangs there
				require.Len(t, apptest.Ledger(t, prov.URL+"/v1/charges?reference="+paymentID), 1, "one charge")
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE order_id = ?", order))
				replay := w.Pay(t, order, key, "pm_card_visa")
				require.Equal(t, retry.Body, replay.Body)
				require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
			})
		}
	}
}

// TestSettledPaymentStoresItsAnswerWithIt: the transaction that settles a
// payment stores the client's answer with it, so no settled payment is
// left with an open record whatever happens after (there used to be a
// window, found by tools/chaos, where the database went away between the
// two and the reconciler had to store the answer later). The payment
// settled by the reconciler is answered the same way, in the same
// transaction.
func TestSettledPaymentStoresItsAnswerWithIt(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			w := apptest.Start(t, dbURL, apptest.WithSilentProvider(provider.Config{}), apptest.Env("RECONCILE_INTERVAL=100ms"))

			order := w.CreateOrder(t, "sk_test_acme")
			key := apptest.NewKey()
			first := w.Pay(t, order, key, "pm_card_visa")
			require.Equal(t, 201, first.Status, string(first.Body))
			require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM idempotency_records WHERE idempotency_key = ? AND state = 'completed' AND response_status = 201", key))
			require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM outside_calls WHERE client_key = ? AND state = 'done' AND due_at IS NULL", key))

			lost := w.CreateOrder(t, "sk_test_acme")
			lostKey := apptest.NewKey()
			accepted := w.Pay(t, lost, lostKey, "pm_fault_lost_response")
			require.Equal(t, 202, accepted.Status, string(accepted.Body))
			testkit.Eventually(t, 20*time.Second, "the reconciler settled it and stored the answer", func() bool {
				return w.Count(t, "SELECT count(*) FROM idempotency_records WHERE idempotency_key = ? AND state = 'completed' AND response_status = 201", lostKey) == 1
			})
			require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM idempotency_records WHERE state = 'executing'"))
			retry := w.Pay(t, lost, lostKey, "pm_fault_lost_response")
			require.Equal(t, 201, retry.Status, string(retry.Body))
			require.Equal(t, "true", retry.Header.Get("Idempotent-Replayed"))
			require.Len(t, w.Charges(t, retry.JSON(t)["id"].(string)), 1)
		})
	}
}

// TestProviderDownFailsFastWithNoEffect points the API at a provider that is
// not there: payments answer 502 provider_unavailable, nothing is charged,
// and once the circuit breaker has opened the answer comes without a call.
func TestProviderDownFailsFastWithNoEffect(t *testing.T) {
	dbURL := testkit.DatabaseURL(t, database.SQLite)
	w := apptest.Start(t, dbURL, apptest.Env("PROVIDER_URL=http://"+testkit.FreeAddr(t)))
	for i := range 8 {
		order := w.CreateOrder(t, "sk_test_acme")
		a := w.Pay(t, order, apptest.NewKey(), "pm_card_visa")
		require.Equal(t, 502, a.Status, "attempt %d: %s", i, a.Body)
		require.Equal(t, "provider_unavailable", a.JSON(t)["code"])
	}
	require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM payments WHERE status <> 'pending'"), "nothing was charged or settled")
	require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM orders WHERE status = 'paid'"))
}
