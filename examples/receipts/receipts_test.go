package receipts_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/examples/receipts"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
	"github.com/idemkeys/payments/internal/idempotency/gormstore"
	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/internal/testkit/outside"
)

// newAPI mounts the receipts route the way a fork does, on a real
// database of dialect, in front of mailer, its keeper's reconciler running
// (every 100 ms, as RECONCILE_INTERVAL would say). The lock timeout is
// twice the mail client's timeout, as it must be: a lock that runs out
// while the owner still waits for its outside call lets the reconciler
// take the record over, and the owner's own answer is then refused (409).
func newAPI(t *testing.T, dialect database.Dialect, mailer *outside.Service) http.Handler {
	h, _ := newAPIWithDB(t, dialect, mailer)
	return h
}

func newAPIWithDB(t *testing.T, dialect database.Dialect, mailer *outside.Service) (http.Handler, *database.DB) {
	t.Helper()
	db := testkit.OpenDB(t, dialect)
	require.NoError(t, db.Exec(receipts.Table).Error)
	mail := httptest.NewServer(mailer)
	t.Cleanup(mail.Close)

	store := gormstore.New(db.DB)
	keeper := idempotency.New(store, idempotency.Config{Transactor: store, LockTimeout: 2 * time.Second, Wait: 3 * time.Second,
		ReconcileInterval: 100 * time.Millisecond})
	idem := ginidem.New(keeper, ginidem.Options{Scope: func(c *gin.Context) string { return c.GetString("merchant") }, Answer: receipts.Problem})

	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.Use(func(c *gin.Context) { c.Set("merchant", "acme") })
	r.POST("/v1/orders/:id/receipts", idem.Guarded(receipts.New(keeper, db.DB, mail.URL).Handle)) // the route: wiring
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // the reconciler: wiring, once per process, as internal/app runs it
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := keeper.Reconcile(ctx); err != nil && ctx.Err() == nil {
				t.Logf("reconciler: round failed: %v", err)
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	return r, db
}

// newMailer is the outside mail service the tests count mails at
// (internal/testkit/outside): one mail per key, ids msg_1, msg_2, ...; it
// refuses for good a recipient at the .invalid domain.
func newMailer() *outside.Service {
	return &outside.Service{Prefix: "msg_", Refuse: func(mail map[string]any) string {
		if to, _ := mail["to"].(string); strings.HasSuffix(to, ".invalid") {
			return "the recipient's domain does not exist"
		}
		return ""
	}}
}

func send(h http.Handler, key string) *httptest.ResponseRecorder {
	return sendTo(h, key, "ada@example.com")
}

func sendTo(h http.Handler, key, to string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/orders/ord_1/receipts", strings.NewReader(`{"to":"`+to+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderKey, key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestReceiptIsMailedOnce: a replay and 30 concurrent copies of a key mail
// one receipt each, counted at the mail service.
func TestReceiptIsMailedOnce(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			mailer := newMailer()
			h := newAPI(t, dialect, mailer)

			first := send(h, "receipt-1")
			require.Equal(t, 201, first.Code, first.Body.String())
			again := send(h, "receipt-1")
			require.Equal(t, 201, again.Code)
			require.Equal(t, "true", again.Header().Get(ginidem.HeaderReplayed))
			require.Equal(t, first.Body.String(), again.Body.String())
			require.Equal(t, 1, mailer.Effects())

			var wg sync.WaitGroup
			for range 30 {
				wg.Go(func() {
					w := send(h, "receipt-2")
					require.Contains(t, []int{201, 409}, w.Code, w.Body.String())
				})
			}
			wg.Wait()
			require.Equal(t, 2, mailer.Effects(), "30 copies, one mail")
		})
	}
}

// TestLostAnswerIsSettledByTheRetry: the mail service sends the mail but
// its answer never arrives. The client is told 202 (unknown); its retry
// under the same key asks again under the call's key, gets the mail that
// was sent, and answers 201: one mail.
func TestLostAnswerIsSettledByTheRetry(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			mailer := newMailer()
			mailer.LoseFirst = 3 * time.Second
			h := newAPI(t, dialect, mailer)

			lost := send(h, "receipt-3")
			require.Equal(t, 202, lost.Code, lost.Body.String())
			require.Contains(t, lost.Body.String(), `"status":"unknown"`)
			require.Equal(t, 1, mailer.Effects())

			retry := send(h, "receipt-3")
			require.Equal(t, 201, retry.Code, retry.Body.String())
			require.Contains(t, retry.Body.String(), `"message_id":"msg_1"`)
			require.Equal(t, 1, mailer.Effects(), "the retry got the mail already sent")
			require.Equal(t, "true", send(h, "receipt-3").Header().Get(ginidem.HeaderReplayed))
		})
	}
}

// TestUnavailableServiceIsNotExecuted: the mail service answers 503, which
// it sends only before any effect: not executed. The client is told 502
// and the answer is not stored, so its retry under the same key sends the
// mail (201): one mail, and the retry's answer is the one replayed.
func TestUnavailableServiceIsNotExecuted(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			mailer := newMailer()
			mailer.Unavailable = 1
			h := newAPI(t, dialect, mailer)

			busy := send(h, "receipt-6")
			require.Equal(t, 502, busy.Code, busy.Body.String())
			require.Contains(t, busy.Body.String(), "not executed")
			require.Empty(t, busy.Header().Get(ginidem.HeaderReplayed))
			require.Zero(t, mailer.Effects(), "a 503 sends nothing")

			retry := send(h, "receipt-6")
			require.Equal(t, 201, retry.Code, retry.Body.String())
			require.Empty(t, retry.Header().Get(ginidem.HeaderReplayed), "the 502 was not stored: the retry ran")
			require.Equal(t, 1, mailer.Effects())

			replay := send(h, "receipt-6")
			require.Equal(t, "true", replay.Header().Get(ginidem.HeaderReplayed))
			require.Equal(t, retry.Body.String(), replay.Body.String())
			require.Equal(t, 1, mailer.Effects())
		})
	}
}

// TestRefusedRecipientIsAnsweredForGood: the mail service refuses the
// recipient (a 4xx): a definitive answer, stored and replayed (422), not an
// unknown outcome that a reconciler would send again and again: the mail
// service is asked once, whatever the reconciler's rounds.
func TestRefusedRecipientIsAnsweredForGood(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			mailer := newMailer()
			h := newAPI(t, dialect, mailer)
			first := sendTo(h, "receipt-4", "ada@example.invalid")
			require.Equal(t, 422, first.Code, first.Body.String())
			require.Contains(t, first.Body.String(), `"status":"refused"`)
			again := sendTo(h, "receipt-4", "ada@example.invalid")
			require.Equal(t, 422, again.Code)
			require.Equal(t, "true", again.Header().Get(ginidem.HeaderReplayed))
			require.Equal(t, first.Body.String(), again.Body.String())
			require.Zero(t, mailer.Effects())
			time.Sleep(300 * time.Millisecond) // three of the reconciler's rounds
			require.Equal(t, 1, mailer.Posts(), "the refusal was asked for once: nothing sends the mail again")
		})
	}
}

// TestLostAnswerSettlesWithoutARequest: the mail is sent, its answer lost,
// the client told 202 and never seen again. The reconciler asks the mail
// service under the call's key, settles the receipt and stores the key's
// answer by itself: a later request replays 201, one mail.
func TestLostAnswerSettlesWithoutARequest(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			mailer := newMailer()
			mailer.LoseFirst = 3 * time.Second
			h, db := newAPIWithDB(t, dialect, mailer)
			lost := send(h, "receipt-5")
			require.Equal(t, 202, lost.Code, lost.Body.String())
			testkit.Eventually(t, 20*time.Second, "the reconciler stores the key's answer", func() bool {
				var state string
				err := db.Raw(`SELECT state FROM idempotency_records WHERE idempotency_key = 'receipt-5'`).Row().Scan(&state)
				return err == nil && state == "completed"
			})
			replay := send(h, "receipt-5")
			require.Equal(t, 201, replay.Code, replay.Body.String())
			require.Equal(t, "true", replay.Header().Get(ginidem.HeaderReplayed))
			require.Equal(t, 1, mailer.Effects())
		})
	}
}
