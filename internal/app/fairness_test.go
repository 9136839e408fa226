package app_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/testkit"
)

// Sizes of the fairness test.
const (
	fairBacklog       = 1000 // acme's pending payments
	fairInterval      = 500 * time.Millisecond
	fairCancel        = 3 * time.Second
	fairRoundsAllowed = 3 // issue 25: within three rounds
)

// TestReconcilerIsFairAcrossMerchants gives one merchant (acme) a backlog of
// 1,000 pending payments, each answered 502 because the provider was
// unavailable, and then makes another merchant's (globex) payment lose its
// provider answer (202): the reconciler must settle globex's payment within
// three rounds, whatever acme's backlog costs, in two settings:
//
//   - "not due": the backlog is far from its cancel (PENDING_CANCEL_AFTER
//     1h), the default's situation, where nothing is to be done about it;
//   - "due": every pending payment of the backlog may be canceled
//     (PENDING_CANCEL_AFTER 3s, long past), so each round has work on it.
//
// Rounds are counted from the reconciler's own log line, one per round that
// settled something (plus the round that settled globex's payment). Before
// issue 25 each round took the 100 oldest unresolved payments: the backlog
// came back every round unchanged when not due (globex's payment waited
// forever), and had to be canceled 100 at a time before its turn when due.
func TestReconcilerIsFairAcrossMerchants(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, _ := apptest.Binaries(t)
	dbURL := testkit.DatabaseURL(t, database.Postgres)
	prov, err := provider.StartInProcess(t.Context(), provider.Config{}) // no webhooks: only the reconciler settles
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Shutdown(t.Context()) })

	// The backlog is made with the reconciler idle, so that it is whole
	// when the rounds start.
	api := apptest.StartBinary(t, apiBin, dbURL, apptest.Env("PROVIDER_URL="+prov.URL,
		"IDEMPOTENCY_LOCK_TIMEOUT=2s", "PROVIDER_TIMEOUT=1s", "IDEMPOTENCY_WAIT=200ms",
		"RATE_LIMIT_NEW_KEYS=0", "LOG_LEVEL=info", "RECONCILE_INTERVAL=1h", "PENDING_CANCEL_AFTER=1h"))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
	)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for range next {
				// Not require: this is not the test's goroutine.
				if err := payUnavailable(api.URL); err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	for i := range fairBacklog {
		next <- i
	}
	close(next)
	wg.Wait()
	require.Empty(t, failures)
	made := time.Now()
	require.EqualValues(t, fairBacklog, pendingOf(t, api, "mch_acme"))

	for _, setting := range []struct {
		name, cancelAfter string
	}{{"not due", "1h"}, {"due", fairCancel.String()}} {
		t.Run(setting.name, func(t *testing.T) {
			if setting.cancelAfter == fairCancel.String() {
				// Every attempt of the backlog is past its cancel window.
				time.Sleep(time.Until(made.Add(fairCancel)))
			}
			api.Process.Stop(30 * time.Second)
			api.Process.Env = append(api.Process.Env, "RECONCILE_INTERVAL="+fairInterval.String(), "PENDING_CANCEL_AFTER="+setting.cancelAfter)
			require.NoError(t, api.Process.Start(time.Minute))
			before := pendingOf(t, api, "mch_acme")

			order := api.CreateOrder(t, "sk_test_globex")
			accepted := apptest.Call(t, "POST", api.URL+"/v1/orders/"+order+"/payments", "sk_test_globex", apptest.NewKey(),
				`{"payment_method":"pm_fault_lost_response"}`)
			require.Equal(t, 202, accepted.Status, string(accepted.Body))
			unknownSince := time.Now()
			payment := accepted.JSON(t)["id"].(string)

			testkit.Eventually(t, 60*time.Second, "globex's payment settled", func() bool {
				return api.Count(t, "SELECT count(*) FROM payments WHERE id = ? AND status = 'succeeded'", payment) == 1
			})
			seen := time.Now()
			left := pendingOf(t, api, "mch_acme")
			settledAt := settledTime(t, api, payment, unknownSince, seen)
			took := settledAt.Sub(unknownSince)
			t.Logf("globex's lost-response payment settled %s after its 202 (%.1f intervals of %s); acme's backlog %d → %d pending",
				took.Round(10*time.Millisecond), float64(took)/float64(fairInterval), fairInterval, before, left)
			rounds := 0
			if setting.cancelAfter == fairCancel.String() {
				// Each round cancels part of the backlog, so each logs its
				// line: the count is exact.
				rounds = 1 + roundsLogged(t, api.Logs(), unknownSince, settledAt)
				t.Logf("settled in round %d after its 202", rounds)
			}
			require.Greater(t, left, before*9/10, "globex's payment did not wait for acme's backlog to drain")
			require.LessOrEqual(t, rounds, fairRoundsAllowed, "settled within three reconcile rounds")
		})
	}
}

// payUnavailable makes one order of acme's and pays it with a method the
// provider refuses (503) the first time: a 502, and a pending payment.
func payUnavailable(baseURL string) error {
	created, err := apptest.Do(apptest.Request{Method: "POST", URL: baseURL + "/v1/orders", APIKey: "sk_test_acme",
		Key: apptest.NewKey(), Body: apptest.OrderBody})
	if err != nil || created.Status != 201 {
		return fmt.Errorf("create an order: %d %s %v", created.Status, created.Body, err)
	}
	var order struct{ ID string }
	if err := json.Unmarshal(created.Body, &order); err != nil {
		return err
	}
	a, err := apptest.Do(apptest.Request{Method: "POST", URL: baseURL + "/v1/orders/" + order.ID + "/payments",
		APIKey: "sk_test_acme", Key: apptest.NewKey(), Body: `{"payment_method":"pm_fault_unavailable"}`})
	if err != nil || a.Status != 502 {
		return fmt.Errorf("pay order %s: %d %s %v", order.ID, a.Status, a.Body, err)
	}
	return nil
}

// pendingOf counts a merchant's pending payments.
func pendingOf(t *testing.T, api *apptest.API, merchant string) int64 {
	t.Helper()
	return api.Count(t, "SELECT count(*) FROM payments WHERE merchant_id = ? AND status = 'pending'", merchant)
}

// settledTime is when the payment was settled, as the API wrote it
// (updated_at), if that lies between the 202 and when the test saw it;
// otherwise when the test saw it.
func settledTime(t *testing.T, api *apptest.API, paymentID string, from, seen time.Time) time.Time {
	t.Helper()
	db, err := database.Open(api.DatabaseURL, database.Options{MaxOpenConns: 1})
	require.NoError(t, err)
	defer db.Close()
	var at time.Time
	require.NoError(t, db.Raw("SELECT updated_at FROM payments WHERE id = ?", paymentID).Scan(&at).Error)
	if at.Before(from) || at.After(seen) {
		return seen
	}
	return at
}

// roundMessages are the reconciler's lines that end a round: one that
// settled something, or one that failed.
var roundMessages = map[string]bool{
	"reconciler: settled outside calls": true,
	"reconciler: round failed":          true,
}

// roundsLogged counts the reconciler's rounds that ended, by their log
// line, strictly between from and to.
func roundsLogged(t *testing.T, logs string, from, to time.Time) int {
	t.Helper()
	n := 0
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || !roundMessages[line.Msg] {
			continue
		}
		if line.Time.After(from) && line.Time.Before(to) {
			n++
		}
	}
	return n
}
