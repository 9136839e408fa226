package app_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// forge posts a correctly signed event (the well-known test secret, as a
// leaked secret would allow) about object and returns the answer.
func forge(t *testing.T, w *apptest.API, id, eventType, object string) apptest.Answer {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"object":%s}}`, id, eventType, time.Now().Unix(), object))
	return apptest.Call(t, "POST", w.URL+"/v1/webhooks/provider", "", "", string(body),
		"Provider-Signature", provider.Sign("whsec_test", time.Now(), body))
}

// execSQL runs one statement in the database at url, on a connection of
// its own.
func execSQL(url, query string, args ...any) error {
	db, err := database.Open(url, database.Options{MaxOpenConns: 1})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Exec(query, args...).Error
}

// paymentOf returns the id of the order's (only) payment, from the database.
func paymentOf(t *testing.T, w *apptest.API, order string) string {
	t.Helper()
	db, err := database.Open(w.DatabaseURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer db.Close()
	var id string
	require.NoError(t, db.Raw("SELECT id FROM payments WHERE order_id = ?", order).Scan(&id).Error)
	require.NotEmpty(t, id)
	return id
}

func status(t *testing.T, w *apptest.API, table, id string) string {
	t.Helper()
	for _, st := range []string{"pending", "processing", "succeeded", "failed", "canceled"} {
		if w.Count(t, "SELECT count(*) FROM "+table+" WHERE id = ? AND status = ?", id, st) == 1 {
			return st
		}
	}
	t.Fatalf("%s %s not found", table, id)
	return ""
}

// A signed event is a hint: the API asks the provider, and an event the
// provider does not confirm changes nothing and is not recorded.
func TestForgedWebhookChangesNothing(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			// No webhooks of the provider's own and no reconciler rounds:
			// nothing but the forged events touches the payments.
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithSilentProvider(provider.Config{}),
				apptest.Env("PROVIDER_TIMEOUT=300ms", "RECONCILE_INTERVAL=1h"))

			t.Run("succeeded, for a payment the provider never charged", func(t *testing.T) {
				order := w.CreateOrder(t, "sk_test_acme")
				refused := w.Pay(t, order, apptest.NewKey(), provider.MethodFaultUnavailable)
				require.Equal(t, 502, refused.Status, string(refused.Body))
				pay := paymentOf(t, w, order)

				a := forge(t, w, "evt_forged_ok", "charge.succeeded", fmt.Sprintf(
					`{"id":"ch_forged","object":"charge","status":"succeeded","amount":1,"currency":"BRL","reference":%q,"idempotency_key":%q}`, pay, pay))
				require.Equal(t, 200, a.Status, string(a.Body))
				require.Equal(t, "pending", status(t, w, "payments", pay))
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM orders WHERE id = ? AND status = 'pending_payment'", order))
				require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM webhook_events WHERE event_id = 'evt_forged_ok'"), "not recorded as applied")
				require.Empty(t, w.Charges(t, pay))
			})

			t.Run("declined, for a payment the provider charged", func(t *testing.T) {
				order := w.CreateOrder(t, "sk_test_acme")
				lost := w.Pay(t, order, apptest.NewKey(), provider.MethodFaultLostResponse)
				require.Equal(t, 202, lost.Status, string(lost.Body))
				pay := lost.JSON(t)["id"].(string)
				charges := w.Charges(t, pay)
				require.Len(t, charges, 1)

				a := forge(t, w, "evt_forged_declined", "charge.declined", fmt.Sprintf(
					`{"id":%q,"object":"charge","status":"declined","decline_code":"card_declined","amount":2500,"currency":"BRL","reference":%q,"idempotency_key":%q}`,
					charges[0]["id"], pay, pay))
				require.Equal(t, 200, a.Status, string(a.Body))
				require.Equal(t, "processing", status(t, w, "payments", pay), "never failed without the provider saying so")
				require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM webhook_events WHERE event_id = 'evt_forged_declined'"))
				// The order is not payable again by another key: a second
				// real charge is refused while this one is in flight.
				again := w.Pay(t, order, apptest.NewKey(), provider.MethodCardVisa)
				require.Equal(t, 409, again.Status, string(again.Body))
				require.Equal(t, "payment_in_progress", again.JSON(t)["code"])
			})

			t.Run("a refund overstated", func(t *testing.T) {
				order := w.CreateOrder(t, "sk_test_acme")
				paid := w.Pay(t, order, apptest.NewKey(), provider.MethodCardVisa)
				require.Equal(t, 201, paid.Status, string(paid.Body))
				pay := paid.JSON(t)["id"].(string)
				rf := apptest.Call(t, "POST", w.URL+"/v1/payments/"+pay+"/refunds", "sk_test_acme", apptest.NewKey(), `{"amount":1500}`)
				require.Equal(t, 201, rf.Status, string(rf.Body))
				refund := rf.JSON(t)["id"].(string)
				var providerRefund string
				for _, r := range apptest.Ledger(t, w.Provider.URL+"/v1/refunds?reference="+refund) {
					providerRefund = r["id"].(string)
				}
				require.NotEmpty(t, providerRefund)

				a := forge(t, w, "evt_forged_refund", "refund.succeeded", fmt.Sprintf(
					`{"id":%q,"object":"refund","status":"succeeded","charge":%q,"amount":2500,"currency":"BRL","reference":%q,"idempotency_key":%q}`,
					providerRefund, paid.JSON(t)["provider_charge_id"], refund, refund))
				require.Equal(t, 200, a.Status, string(a.Body))
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE id = ? AND amount_refunded = 1500", pay))
				require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM webhook_events WHERE event_id = 'evt_forged_refund'"))
			})

			t.Run("a refund the provider never made", func(t *testing.T) {
				order := w.CreateOrder(t, "sk_test_acme")
				paid := w.Pay(t, order, apptest.NewKey(), provider.MethodCardVisa)
				require.Equal(t, 201, paid.Status, string(paid.Body))
				pay := paid.JSON(t)["id"].(string)
				// A refund row the provider has never heard of: pending,
				// as after a crash before the provider call.
				require.NoError(t, execSQL(w.DatabaseURL, `INSERT INTO refunds (merchant_id, id, payment_id, amount, currency, status, provider_key, idempotency_key, created_at, updated_at, trace_parent, last_attempt_at)
SELECT merchant_id, 're_forged', id, 2500, currency, 'pending', 're_forged', 'k-forged', created_at, created_at, '', created_at FROM payments WHERE id = ?`, pay))
				a := forge(t, w, "evt_forged_refund2", "refund.succeeded", fmt.Sprintf(
					`{"id":"rf_forged","object":"refund","status":"succeeded","charge":%q,"amount":2500,"currency":"BRL","reference":"re_forged","idempotency_key":"re_forged"}`,
					paid.JSON(t)["provider_charge_id"]))
				require.Equal(t, 200, a.Status, string(a.Body))
				require.Equal(t, "pending", status(t, w, "refunds", "re_forged"))
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE id = ? AND amount_refunded = 0", pay))
			})

			t.Run("a true event is still applied", func(t *testing.T) {
				order := w.CreateOrder(t, "sk_test_acme")
				lost := w.Pay(t, order, apptest.NewKey(), provider.MethodFaultLostResponse)
				require.Equal(t, 202, lost.Status, string(lost.Body))
				pay := lost.JSON(t)["id"].(string)
				charges := w.Charges(t, pay)
				require.Len(t, charges, 1)
				a := forge(t, w, "evt_true", "charge.succeeded", fmt.Sprintf(
					`{"id":%q,"object":"charge","status":"succeeded","amount":2500,"currency":"BRL","reference":%q,"idempotency_key":%q}`,
					charges[0]["id"], pay, pay))
				require.Equal(t, 200, a.Status, string(a.Body))
				require.Equal(t, "succeeded", status(t, w, "payments", pay))
				require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM webhook_events WHERE event_id = 'evt_true'"))
			})

			m, _ := metricsOf(t, w.URL)
			require.EqualValues(t, 4, m[`payments_webhook_events_total{outcome="forged"}`], "each forged event is counted")
		})
	}
}

// When the provider cannot be asked about an event, the webhook answers 503
// and applies nothing, so the provider delivers it again.
func TestWebhookProviderUnreachableIs503(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithSilentProvider(provider.Config{}),
				apptest.Env("PROVIDER_TIMEOUT=300ms", "RECONCILE_INTERVAL=1h"))
			order := w.CreateOrder(t, "sk_test_acme")
			lost := w.Pay(t, order, apptest.NewKey(), provider.MethodFaultLostResponse)
			require.Equal(t, 202, lost.Status, string(lost.Body))
			pay := lost.JSON(t)["id"].(string)
			charge := w.Charges(t, pay)[0]["id"]
			require.NoError(t, w.Provider.Shutdown(t.Context()))

			a := forge(t, w, "evt_unasked", "charge.succeeded", fmt.Sprintf(
				`{"id":%q,"object":"charge","status":"succeeded","amount":2500,"currency":"BRL","reference":%q,"idempotency_key":%q}`, charge, pay, pay))
			require.Equal(t, 503, a.Status, string(a.Body))
			require.Equal(t, "provider_unavailable", a.JSON(t)["code"])
			require.NotEmpty(t, a.Header.Get("Retry-After"))
			require.Equal(t, "processing", status(t, w, "payments", pay))
			require.EqualValues(t, 0, w.Count(t, "SELECT count(*) FROM webhook_events WHERE event_id = 'evt_unasked'"))
		})
	}
}

// cancelEnv makes the cancel window short: it must exceed the lock
// timeout, which must exceed the provider timeout. The provider timeout is
// generous, so that a loaded machine does not turn the provider's quick 503
// (a 502 here) into a timeout (a 202).
var cancelEnv = apptest.Env("PROVIDER_TIMEOUT=2s", "IDEMPOTENCY_LOCK_TIMEOUT=3s", "IDEMPOTENCY_WAIT=1s",
	"PENDING_CANCEL_AFTER=4s", "RECONCILE_INTERVAL=100ms")

// waitStatus polls the database until the row has the status, for at most
// a generous bound.
func waitStatus(t *testing.T, w *apptest.API, table, id, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for w.Count(t, "SELECT count(*) FROM "+table+" WHERE id = ? AND status = ?", id, want) != 1 {
		require.True(t, time.Now().Before(deadline), "%s %s never became %s (is %s)", table, id, want, status(t, w, table, id))
		time.Sleep(50 * time.Millisecond)
	}
}

// A payment that never reached the provider (a 502 never retried) is
// canceled after PENDING_CANCEL_AFTER: the order is payable again with a new
// key, and the old key answers the stored 409 payment_canceled.
func TestAbandonedPaymentIsCanceled(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithSilentProvider(provider.Config{}), cancelEnv)
			order := w.CreateOrder(t, "sk_test_acme")
			key := apptest.NewKey()
			refused := w.Pay(t, order, key, provider.MethodFaultUnavailable)
			require.Equal(t, 502, refused.Status, string(refused.Body))
			pay := refused.JSON(t)["payment_id"].(string)

			waitStatus(t, w, "payments", pay, "canceled")
			got := apptest.Call(t, "GET", w.URL+"/v1/payments/"+pay, "sk_test_acme", "", "")
			require.Equal(t, "canceled", got.JSON(t)["status"])
			require.Empty(t, w.Charges(t, pay), "nothing was charged")

			for range 2 {
				old := w.Pay(t, order, key, provider.MethodFaultUnavailable)
				require.Equal(t, 409, old.Status, string(old.Body))
				require.Equal(t, "payment_canceled", old.JSON(t)["code"])
				require.Equal(t, pay, old.JSON(t)["payment_id"])
				require.Equal(t, "true", old.Header.Get("Idempotent-Replayed"), "stored, and replayed")
			}
			require.Empty(t, w.Charges(t, pay), "the old key charges nothing, ever")

			paid := w.Pay(t, order, apptest.NewKey(), provider.MethodCardVisa)
			require.Equal(t, 201, paid.Status, string(paid.Body))
			require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM orders WHERE id = ? AND status = 'paid'", order))
			m, _ := metricsOf(t, w.URL)
			require.EqualValues(t, 1, m[`payments_reconciliations_total{result="canceled"}`])
		})
	}
}

// The same for a refund: its reservation is released, and GET
// /v1/refunds/{id} shows it.
func TestAbandonedRefundIsCanceled(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			// Every first request under a provider key is refused before
			// any effect: a payment is paid on its retry, a refund 502s.
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect),
				apptest.WithSilentProvider(provider.Config{Chaos: provider.Chaos{UnavailableRate: 1}}), cancelEnv)
			order := w.CreateOrder(t, "sk_test_acme")
			payKey := apptest.NewKey()
			require.Equal(t, 502, w.Pay(t, order, payKey, provider.MethodCardVisa).Status)
			paid := w.Pay(t, order, payKey, provider.MethodCardVisa)
			require.Equal(t, 201, paid.Status, string(paid.Body))
			pay := paid.JSON(t)["id"].(string)

			refundKey := apptest.NewKey()
			refused := apptest.Call(t, "POST", w.URL+"/v1/payments/"+pay+"/refunds", "sk_test_acme", refundKey, `{"amount":2500}`)
			require.Equal(t, 502, refused.Status, string(refused.Body))
			refund := refused.JSON(t)["refund_id"].(string)
			require.NotEmpty(t, refund)
			got := apptest.Call(t, "GET", w.URL+"/v1/refunds/"+refund, "sk_test_acme", "", "")
			require.Equal(t, 200, got.Status, string(got.Body))
			require.Equal(t, "processing", got.JSON(t)["status"])

			waitStatus(t, w, "refunds", refund, "canceled")
			require.Equal(t, "canceled", apptest.Call(t, "GET", w.URL+"/v1/refunds/"+refund, "sk_test_acme", "", "").JSON(t)["status"])
			old := apptest.Call(t, "POST", w.URL+"/v1/payments/"+pay+"/refunds", "sk_test_acme", refundKey, `{"amount":2500}`)
			require.Equal(t, 409, old.Status, string(old.Body))
			require.Equal(t, "refund_canceled", old.JSON(t)["code"])
			require.Equal(t, refund, old.JSON(t)["refund_id"])
			require.Equal(t, "true", old.Header.Get("Idempotent-Replayed"))

			// The reservation is free: the whole amount can be refunded again.
			again := apptest.Call(t, "POST", w.URL+"/v1/payments/"+pay+"/refunds", "sk_test_acme", apptest.NewKey(), `{"amount":2500}`)
			require.Equal(t, 502, again.Status, "refused by the provider's first-request fault, not by the reservation: %s", again.Body)
			require.Empty(t, apptest.Ledger(t, w.Provider.URL+"/v1/refunds?reference="+refund))
		})
	}
}

// A retry with the payment's key racing the reconciler's cancel: exactly
// one of the two wins, never both a charge and a cancel, and the answer
// matches the database and the provider's ledger. Twenty orders, each
// retried at another moment around the end of the window.
func TestRetryRacingCancel(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithSilentProvider(provider.Config{}),
				apptest.Env("PROVIDER_TIMEOUT=2s", "IDEMPOTENCY_LOCK_TIMEOUT=3s", "IDEMPOTENCY_WAIT=4s",
					"PENDING_CANCEL_AFTER=4s", "RECONCILE_INTERVAL=20ms"))
			const runs = 20
			outcome := map[string]int{}
			var mu, serial sync.Mutex
			var wg sync.WaitGroup
			for i := range runs {
				wg.Go(func() {
					order := w.CreateOrder(t, "sk_test_acme")
					key := apptest.NewKey()
					// One 502 at a time, each followed by a charge that
					// works: five refusals in a row would open the
					// provider client's breaker, and the reconciler's
					// lookups would then be refused too.
					serial.Lock()
					refused := w.Pay(t, order, key, provider.MethodFaultUnavailable)
					ok := w.Pay(t, w.CreateOrder(t, "sk_test_acme"), apptest.NewKey(), provider.MethodCardVisa)
					require.Contains(t, []int{201, 202}, ok.Status, "a call that reached the provider (202: slower than its timeout): %s", ok.Body)
					serial.Unlock()
					require.Equal(t, 502, refused.Status, string(refused.Body))
					pay := refused.JSON(t)["payment_id"].(string)
					// From a little before the window ends to a little after.
					time.Sleep(3700*time.Millisecond + time.Duration(i)*40*time.Millisecond)
					retry := w.Pay(t, order, key, provider.MethodFaultUnavailable)
					// Answers that are not final for the key (the claim
					// holds the record, a provider call slower than its
					// timeout on a loaded machine, a busy database): the
					// same key again, as a client does.
					deadline := time.Now().Add(60 * time.Second)
					for (retry.Status == 202 || retry.Status >= 500 ||
						retry.Status == 409 && retry.JSON(t)["code"] == "idempotency_request_in_progress") && time.Now().Before(deadline) {
						time.Sleep(100 * time.Millisecond)
						retry = w.Pay(t, order, key, provider.MethodFaultUnavailable)
					}
					charges := len(w.Charges(t, pay))
					switch retry.Status {
					case 201:
						// The retry resumed first: charged once, and the
						// reconciler never cancels a payment that succeeded.
						require.Equal(t, 1, charges)
						require.Equal(t, "succeeded", status(t, w, "payments", pay))
					case 409:
						require.Equal(t, "payment_canceled", retry.JSON(t)["code"], string(retry.Body))
						require.Zero(t, charges, "canceled, and nothing charged")
						require.Equal(t, "canceled", status(t, w, "payments", pay))
					default:
						t.Errorf("unexpected answer %d %s", retry.Status, retry.Body)
					}
					// Whichever won, the key now answers that for good.
					again := w.Pay(t, order, key, provider.MethodFaultUnavailable)
					require.Equal(t, retry.Status, again.Status, string(again.Body))
					require.Equal(t, charges, len(w.Charges(t, pay)))
					mu.Lock()
					outcome[fmt.Sprint(retry.Status)]++
					mu.Unlock()
				})
			}
			wg.Wait()
			t.Logf("%d retries racing the cancel: %v (201 resumed and charged, 409 found it canceled)", runs, outcome)
			require.Equal(t, runs, outcome["201"]+outcome["409"])
		})
	}
}

// A conflict with a payment in flight is not stored: the same key sent
// again runs again, and once the payment has settled gets the final answer.
func TestInFlightConflictIsNotReplayed(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.WithSilentProvider(provider.Config{}),
				apptest.Env("PROVIDER_TIMEOUT=300ms", "RECONCILE_INTERVAL=1h"))
			order := w.CreateOrder(t, "sk_test_acme")
			firstKey := apptest.NewKey()
			lost := w.Pay(t, order, firstKey, provider.MethodFaultLostResponse)
			require.Equal(t, 202, lost.Status, string(lost.Body))
			pay := lost.JSON(t)["id"].(string)

			other := apptest.NewKey()
			itemKey := apptest.NewKey()
			refundKey := apptest.NewKey()
			item := `{"sku":"SKU-2","name":"Tea","quantity":1,"unit_amount":500}`
			for range 2 {
				a := w.Pay(t, order, other, provider.MethodCardVisa)
				require.Equal(t, 409, a.Status, string(a.Body))
				require.Equal(t, "payment_in_progress", a.JSON(t)["code"])
				require.NotEmpty(t, a.Header.Get("Retry-After"))
				require.Empty(t, a.Header.Get("Idempotent-Replayed"), "not stored, so never replayed")

				a = apptest.Call(t, "POST", w.URL+"/v1/orders/"+order+"/items", "sk_test_acme", itemKey, item)
				require.Equal(t, 409, a.Status, string(a.Body))
				require.Equal(t, "payment_in_progress", a.JSON(t)["code"])
				require.Empty(t, a.Header.Get("Idempotent-Replayed"))

				a = apptest.Call(t, "POST", w.URL+"/v1/payments/"+pay+"/refunds", "sk_test_acme", refundKey, `{"amount":100}`)
				require.Equal(t, 409, a.Status, string(a.Body))
				require.Equal(t, "payment_in_progress", a.JSON(t)["code"])
				require.Empty(t, a.Header.Get("Idempotent-Replayed"))
			}

			// The payment settles (its retry finds the charge the lost
			// answer made): the same keys now get the final answers.
			require.Equal(t, 201, w.Pay(t, order, firstKey, provider.MethodFaultLostResponse).Status)
			a := w.Pay(t, order, other, provider.MethodCardVisa)
			require.Equal(t, 409, a.Status, string(a.Body))
			require.Equal(t, "order_already_paid", a.JSON(t)["code"])
			a = apptest.Call(t, "POST", w.URL+"/v1/payments/"+pay+"/refunds", "sk_test_acme", refundKey, `{"amount":100}`)
			require.Equal(t, 201, a.Status, string(a.Body))
			require.Len(t, w.Charges(t, pay), 1)
		})
	}
}
