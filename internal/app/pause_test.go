package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/problem"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// The short windows of the pause tests, as issue 25 sets them: a record's
// lock runs out after 2 s, an attempt that never reached the provider may
// be canceled after 3 s.
const (
	pauseLock   = 2 * time.Second
	pauseCancel = 3 * time.Second
)

// TestPausedOwnerChargesOnce freezes an API instance (SIGSTOP) once it has
// recorded its intent to charge and its charge is on the way, keeps it
// frozen long past the lock and cancel windows while a second instance on
// the same database reconciles, lets the frozen instance's call reach the
// provider late, and thaws it. A client that retries under its key, and
// pays the order again with a new key if told the payment was canceled,
// must end with one charge for its order, and our payments must agree with
// the provider's ledger.
//
// The takeover variant also retries the frozen owner's key through the
// other instance while the provider answers that instance 503, and lets the
// cancel window pass before the frozen call lands: the retry must not be
// told "nothing was charged" (502) while the frozen owner's call may still
// go out, and the payment must not be canceled.
//
// Before the fence reached the provider call (issue 25), the reconciler
// canceled the payment during the pause and the late call charged it: the
// client paid again, and the order was charged twice.
func TestPausedOwnerChargesOnce(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, _ := apptest.Binaries(t)
	for _, dialect := range testkit.Dialects {
		for _, takeover := range []bool{false, true} {
			name := string(dialect) + "/pause"
			if takeover {
				name = string(dialect) + "/takeover"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				runPause(t, apiBin, dialect, takeover)
			})
		}
	}
}

func runPause(t *testing.T, apiBin string, dialect database.Dialect, takeover bool) {
	dbURL := testkit.DatabaseURL(t, dialect)
	prov, err := provider.StartInProcess(context.Background(), provider.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })

	// Each instance reaches the provider through a proxy of its own: the
	// frozen owner's (x) holds its charge, the other's (y) can answer 503.
	xFront, yFront := &testkit.FaultProxy{Upstream: prov.URL}, &testkit.FaultProxy{Upstream: prov.URL}
	for _, p := range []*testkit.FaultProxy{xFront, yFront} {
		_, err := p.Start()
		require.NoError(t, err)
		t.Cleanup(p.Close)
	}
	windows := []string{
		"IDEMPOTENCY_LOCK_TIMEOUT=" + pauseLock.String(), "PENDING_CANCEL_AFTER=" + pauseCancel.String(),
		"PROVIDER_TIMEOUT=1500ms", "IDEMPOTENCY_WAIT=200ms", "RECONCILE_INTERVAL=200ms",
	}
	// The owner's outbox dispatcher and janitor stay idle: frozen inside
	// one of their write transactions, it would stall every other process
	// on an SQLite file, which is another fault than the one under test.
	x := apptest.StartBinary(t, apiBin, dbURL, apptest.Env(append(windows, "PROVIDER_URL="+xFront.URL(),
		"OUTBOX_INTERVAL=1h", "JANITOR_INTERVAL=1h")...))
	y := apptest.StartBinary(t, apiBin, dbURL, apptest.Env(append(windows, "PROVIDER_URL="+yFront.URL())...))

	order := y.CreateOrder(t, "sk_test_acme")
	key := apptest.NewKey()
	// x is frozen the moment its charge reaches its proxy: after it
	// committed everything it does before calling the provider.
	xFront.HoldWhere(testkit.Charge, func() { x.Process.Send(syscall.SIGSTOP) })
	first := make(chan apptest.Answer, 1)
	go func() {
		a, err := apptest.Do(payRequest(x.URL, order, key))
		if err != nil {
			a = apptest.Answer{Body: []byte(err.Error())}
		}
		first <- a
	}()
	testkit.Eventually(t, 30*time.Second, "the owner's charge reached its proxy", func() bool { return xFront.Held() == 1 })
	paused := time.Now()
	frozenUntil := paused.Add(pauseLock + pauseCancel + 3*time.Second)

	var takenOver apptest.Answer
	if takeover {
		// The client retries through the other instance once the owner's
		// lock has run out; the provider is down for that instance.
		yFront.RefuseWhere(testkit.Charge)
		var retry apptest.Answer
		testkit.Eventually(t, 30*time.Second, "the other instance takes the key over", func() bool {
			retry = apptest.Send(t, payRequest(y.URL, order, key))
			return retry.Status != http.StatusConflict || answerCode(retry) != problem.CodeIdempotencyInProgress
		})
		t.Logf("the retry through the other instance, the provider answering 503: %s", describeAnswer(retry))
		takenOver = retry
		// The cancel window passes from this attempt too.
		frozenUntil = laterOf(frozenUntil, time.Now().Add(pauseCancel+3*time.Second))
	}

	// The freeze itself: a duration, not a wait for a state. The other
	// instance's reconciler has a round every 200 ms meanwhile.
	time.Sleep(time.Until(frozenUntil))
	yFront.RefuseWhere(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, xFront.Release(ctx), "the frozen owner's late call reaches the provider")
	x.Process.Send(syscall.SIGCONT)
	t.Logf("frozen %s; the owner's own request was then answered %s", time.Since(paused).Round(100*time.Millisecond), describeAnswer(<-first))

	// The client goes on as a careful client does: retry under its key
	// until a final answer, and pay again under a new key if the payment
	// was canceled.
	final, keys := payUntilFinal(t, []*apptest.API{y, x}, order, key)
	t.Logf("the client's final answer, after %d key(s): %s", keys, describeAnswer(final))

	testkit.Eventually(t, 30*time.Second, "nothing left pending or processing", func() bool {
		return y.Count(t, "SELECT count(*) FROM payments WHERE status IN ('pending', 'processing')") == 0
	})
	audit := auditLedger(t, dbURL, prov.URL)
	t.Logf("ledger audit: %s", audit)
	require.LessOrEqual(t, audit.netCharges[order], 1, "at most one net charge for the order")
	require.Zero(t, audit.unhandledOrphans, "a charge the provider holds for a payment we consider canceled or failed")
	require.Empty(t, audit.disagreements, "our payments agree with the provider's ledger")
	require.NotEqual(t, http.StatusBadGateway, takenOver.Status,
		"502 says nothing was charged, while the frozen owner's call could still land: %s", takenOver.Body)
	require.Equal(t, http.StatusCreated, final.Status, string(final.Body))
	require.Equal(t, 1, keys, "the client never had to pay again")
	o := apptest.Call(t, "GET", y.URL+"/v1/orders/"+order, "sk_test_acme", "", "").JSON(t)
	require.Equal(t, "paid", o["status"])
}

// payRequest pays orderID as acme under key with a card that succeeds.
func payRequest(baseURL, orderID, key string) apptest.Request {
	return apptest.Request{Method: "POST", URL: baseURL + "/v1/orders/" + orderID + "/payments",
		APIKey: "sk_test_acme", Key: key, Body: `{"payment_method":"pm_card_visa"}`}
}

// payUntilFinal is a careful client: it retries under key, through the
// instances in turn, until a final answer (202, a 409 that clears and 5xx
// are not), and when that answer is payment_canceled it pays the order
// again under a new key. It returns the last final answer and how many keys
// it used.
func payUntilFinal(t *testing.T, apis []*apptest.API, orderID, key string) (apptest.Answer, int) {
	t.Helper()
	keys, attempts := 1, 0
	for {
		var a apptest.Answer
		testkit.Eventually(t, 60*time.Second, "a final answer under key "+key, func() bool {
			a = apptest.Send(t, payRequest(apis[attempts%len(apis)].URL, orderID, key))
			attempts++
			switch c := answerCode(a); {
			case a.Status == http.StatusAccepted, a.Status >= 500:
				return false
			case a.Status == http.StatusConflict && (c == problem.CodeIdempotencyInProgress || c == problem.CodePaymentInProgress):
				return false
			}
			return true
		})
		if answerCode(a) != problem.CodePaymentCanceled || keys == 3 {
			return a, keys
		}
		t.Logf("under key %d: %s; paying again under a new key", keys, describeAnswer(a))
		key, keys = apptest.NewKey(), keys+1
	}
}

func answerCode(a apptest.Answer) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(a.Body, &p)
	return p.Code
}

func describeAnswer(a apptest.Answer) string {
	if a.Status == 0 {
		return "no answer (" + string(a.Body) + ")"
	}
	var p struct {
		Code, ID, Status string
	}
	_ = json.Unmarshal(a.Body, &p)
	return fmt.Sprintf("%d %s%s %s", a.Status, p.Code, p.ID, p.Status)
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ledgerAudit is what our database and the provider's ledger say together.
type ledgerAudit struct {
	// netCharges counts, per order, the succeeded charges the provider
	// holds for its payments and has not refunded in full.
	netCharges map[string]int
	// orphans are succeeded charges of payments we consider canceled or
	// failed (or of no payment of ours), and succeeded refunds of refunds
	// we consider canceled or failed; unhandledOrphans, those of them not
	// undone: a charge not refunded in full, and every such refund (a
	// flagged one is not told apart yet).
	orphans, unhandledOrphans int
	// disagreements lists payments whose status, amount or charge is not
	// what the provider holds.
	disagreements []string
	payments      int
}

func (a ledgerAudit) String() string {
	twice := 0
	for _, n := range a.netCharges {
		if n > 1 {
			twice++
		}
	}
	return fmt.Sprintf("%d payment(s), %d order(s) charged more than once (net), %d orphan(s), %d unhandled, %d disagreement(s) %q",
		a.payments, twice, a.orphans, a.unhandledOrphans, len(a.disagreements), a.disagreements)
}

// auditLedger compares every payment and refund in the database at dbURL
// with the whole ledger of the mock provider at providerURL. It reads only
// columns every version of the schema since payments were canceled has, so
// that it runs on older commits too.
func auditLedger(t *testing.T, dbURL, providerURL string) ledgerAudit {
	t.Helper()
	db, err := database.Open(dbURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer db.Close()
	type payment struct {
		ID, OrderID, Status, Currency, ProviderChargeID string
		Amount                                          int64
	}
	var payments []payment
	require.NoError(t, db.Raw(`SELECT id, order_id, status, currency, coalesce(provider_charge_id, '') AS provider_charge_id, amount
		FROM payments`).Scan(&payments).Error)
	type refund struct{ ID, Status string }
	var refunds []refund
	require.NoError(t, db.Raw(`SELECT id, status FROM refunds`).Scan(&refunds).Error)

	a := apptest.Call(t, "GET", providerURL+"/v1/ledger", "", "", "")
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	var ledger provider.Ledger
	require.NoError(t, json.Unmarshal(a.Body, &ledger))

	refunded := map[string]int64{} // by charge id, succeeded refunds only
	for _, r := range ledger.Refunds {
		if r.Status == provider.RefundSucceeded {
			refunded[r.Charge] += r.Amount
		}
	}
	charges := map[string][]provider.Charge{} // by reference: our payment id
	for _, c := range ledger.Charges {
		charges[c.Reference] = append(charges[c.Reference], c)
	}
	res := ledgerAudit{netCharges: map[string]int{}, payments: len(payments)}
	known := map[string]bool{}
	for _, p := range payments {
		known[p.ID] = true
		var live []provider.Charge // succeeded and not refunded in full
		for _, c := range charges[p.ID] {
			if c.Status == provider.ChargeSucceeded && refunded[c.ID] < c.Amount {
				live = append(live, c)
			}
		}
		res.netCharges[p.OrderID] += len(live)
		switch p.Status {
		case "succeeded":
			if len(charges[p.ID]) != 1 {
				res.disagreements = append(res.disagreements, fmt.Sprintf("payment %s succeeded, the provider holds %d charge(s) for it", p.ID, len(charges[p.ID])))
				continue
			}
			c := charges[p.ID][0]
			if c.Status != provider.ChargeSucceeded || c.ID != p.ProviderChargeID || c.Amount != p.Amount || c.Currency != p.Currency {
				res.disagreements = append(res.disagreements, fmt.Sprintf("payment %s succeeded (%d %s, charge %s), the provider's charge is %s %s (%d %s)",
					p.ID, p.Amount, p.Currency, p.ProviderChargeID, c.ID, c.Status, c.Amount, c.Currency))
			}
		case "failed", "canceled":
			for _, c := range charges[p.ID] {
				if c.Status != provider.ChargeSucceeded {
					continue
				}
				res.orphans++
				if refunded[c.ID] < c.Amount {
					res.unhandledOrphans++
					res.disagreements = append(res.disagreements, fmt.Sprintf("payment %s is %s, the provider charged it (%s, %d %s)",
						p.ID, p.Status, c.ID, c.Amount, c.Currency))
				}
			}
		default:
			res.disagreements = append(res.disagreements, fmt.Sprintf("payment %s is still %s", p.ID, p.Status))
		}
	}
	for ref, list := range charges {
		if !known[ref] {
			res.orphans += len(list)
			res.unhandledOrphans += len(list)
			res.disagreements = append(res.disagreements, fmt.Sprintf("the provider charged %d time(s) under reference %s, no payment of ours", len(list), ref))
		}
	}
	ended := map[string]bool{}
	for _, r := range refunds {
		ended[r.ID] = r.Status == "failed" || r.Status == "canceled"
	}
	for _, r := range ledger.Refunds {
		if r.Status == provider.RefundSucceeded && ended[r.Reference] {
			res.orphans++
			res.unhandledOrphans++
			res.disagreements = append(res.disagreements, fmt.Sprintf("refund %s is failed or canceled, the provider refunded it (%s)", r.Reference, r.ID))
		}
	}
	return res
}
