package app_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestSIGKILLDuringSlowPayment kills the API process while the provider is
// still answering a charge it has already made. After a restart, a retry with
// the same key takes the abandoned record over (after the lock timeout),
// resumes the payment under the same provider key, and ends with one charge
// and the final answer.
func TestSIGKILLDuringSlowPayment(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, provBin := apptest.Binaries(t)
	dbURL := testkit.DatabaseURL(t, database.Postgres)

	provAddr := testkit.FreeAddr(t)
	testkit.StartProcess(t, provBin, provAddr) // no WEBHOOK_URL: only the retry may resolve
	w := apptest.StartBinary(t, apiBin, dbURL, apptest.Env("PROVIDER_URL=http://"+provAddr,
		"IDEMPOTENCY_LOCK_TIMEOUT=3s", "PROVIDER_TIMEOUT=2500ms", "RECONCILE_INTERVAL=1h", "IDEMPOTENCY_WAIT=200ms"))
	api := w.Process

	order := w.CreateOrder(t, "sk_test_acme")
	key := apptest.NewKey()
	inflight := make(chan apptest.Answer, 1)
	go func() {
		// The connection dies with the process: no answer, no failure.
		a, _ := apptest.Do(apptest.Request{Method: "POST", URL: w.URL + "/v1/orders/" + order + "/payments",
			APIKey: "sk_test_acme", Key: key, Body: `{"payment_method":"pm_fault_slow"}`})
		inflight <- a
	}()

	var paymentID string
	testkit.Eventually(t, 10*time.Second, "the payment row and its charge exist", func() bool {
		if w.Count(t, "SELECT count(*) FROM payments WHERE order_id = ?", order) == 0 {
			return false
		}
		db, err := database.Open(dbURL, database.Options{MaxOpenConns: 1})
		require.NoError(t, err)
		defer db.Close()
		require.NoError(t, db.Raw("SELECT id FROM payments WHERE order_id = ?", order).Scan(&paymentID).Error)
		return len(apptest.Ledger(t, "http://"+provAddr+"/v1/charges?reference="+paymentID)) == 1
	})
	require.True(t, api.Running(), "the API runs until it is killed")
	api.Kill() // SIGKILL, and wait until it is gone
	require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM payments WHERE id = ? AND status = 'pending'", paymentID),
		"killed before it could record the outcome")

	require.NoError(t, api.Start(time.Minute), "the same binary, address and settings again")
	var final apptest.Answer
	testkit.Eventually(t, 20*time.Second, "a retry gets the final answer", func() bool {
		final = apptest.Call(t, "POST", w.URL+"/v1/orders/"+order+"/payments", "sk_test_acme", key, `{"payment_method":"pm_fault_slow"}`)
		return final.Status == 201
	})
	require.Equal(t, paymentID, final.JSON(t)["id"])
	require.Equal(t, "succeeded", final.JSON(t)["status"])
	require.Len(t, apptest.Ledger(t, "http://"+provAddr+"/v1/charges?reference="+paymentID), 1, "one charge, whatever was killed")
	o := apptest.Call(t, "GET", w.URL+"/v1/orders/"+order, "sk_test_acme", "", "").JSON(t)
	require.Equal(t, "paid", o["status"])
}
