package provider_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/provider"
)

const testSecret = "whsec_for_tests"

// webhookConfig sends events to rcv quickly and, unless a test asks for
// them, without duplicates.
func webhookConfig(rcv *receiver) provider.Config {
	return provider.Config{
		WebhookURL:           rcv.URL,
		WebhookSecret:        testSecret,
		DuplicateWebhookRate: -1,
		WebhookBackoff:       time.Millisecond,
	}
}

func TestWebhook_EventPerOutcome(t *testing.T) {
	rcv := newReceiver(t, testSecret, nil)
	running := startProvider(t, webhookConfig(rcv))
	client := provider.NewClient(running.URL, provider.ClientOptions{})

	tests := []struct {
		method    string
		eventType string
	}{
		{provider.MethodCardVisa, provider.EventChargeSucceeded},
		{provider.MethodCardDeclined, provider.EventChargeDeclined},
		{provider.MethodCardInsufficientFunds, provider.EventChargeDeclined},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			ref := "pay_" + tt.method
			resp := doRaw(t, http.MethodPost, running.URL+"/v1/charges",
				map[string]string{"Idempotency-Key": "wh-" + tt.method}, withMethod(visa(ref), tt.method))
			require.Equal(t, http.StatusCreated, resp.status)

			var event provider.Event
			require.Eventually(t, func() bool {
				for _, ev := range rcv.Events() {
					if c, err := ev.Charge(); err == nil && c.Reference == ref {
						event = ev
						return true
					}
				}
				return false
			}, waitFor, pollEvery)
			require.Equal(t, tt.eventType, event.Type)
			require.Regexp(t, `^evt_`, event.ID)
			require.NotZero(t, event.Created)
			require.Equal(t, string(resp.body), string(event.Data.Object),
				"the event carries the charge exactly as the API answered it")
		})
	}

	t.Run("refunds", func(t *testing.T) {
		charge, err := client.CreateCharge(t.Context(), "wh-refunded", visa("pay_refunded"))
		require.NoError(t, err)
		failed, err := client.CreateRefund(t.Context(), "wh-too-much",
			provider.RefundRequest{Charge: charge.ID, Amount: charge.Amount + 1, Reference: "re_too_much"})
		require.NoError(t, err)
		require.Equal(t, provider.RefundFailed, failed.Status)
		refund, err := client.CreateRefund(t.Context(), "wh-refund",
			provider.RefundRequest{Charge: charge.ID, Amount: 100, Reference: "re_ok"})
		require.NoError(t, err)

		events := rcv.waitForEvents(t, provider.EventRefundSucceeded, 1)
		require.Len(t, events, 1, "a failed refund sends no event")
		got, err := events[0].Refund()
		require.NoError(t, err)
		require.Equal(t, refund, got)
	})

	t.Run("replays send nothing new", func(t *testing.T) {
		_, err := client.CreateCharge(t.Context(), "wh-"+provider.MethodCardVisa, visa("pay_"+provider.MethodCardVisa))
		require.NoError(t, err)
		// The two charges made above deliver their events (perhaps still
		// now); the replay adds none. Close cancels what is still being
		// delivered, so it comes after the two have arrived.
		rcv.waitForEvents(t, provider.EventChargeSucceeded, 2)
		running.Server.Close()
		require.Len(t, rcv.waitForEvents(t, provider.EventChargeSucceeded, 1), 2, "visa and the refunded charge")
	})
	require.Zero(t, rcv.BadSignatures())
}

func TestWebhook_SentWhileALostResponseIsHeld(t *testing.T) {
	rcv := newReceiver(t, testSecret, nil)
	running := startProvider(t, webhookConfig(rcv))
	client := provider.NewClient(running.URL, provider.ClientOptions{Timeout: time.Minute})

	ctx, giveUp := context.WithCancel(t.Context())
	defer giveUp()
	answered := make(chan error, 1)
	go func() {
		_, err := client.CreateCharge(ctx, "lost", withMethod(visa("pay_lost"), provider.MethodFaultLostResponse))
		answered <- err
	}()

	// The webhook is how the caller learns what happened to a lost answer.
	rcv.waitForEvents(t, provider.EventChargeSucceeded, 1)
	select {
	case err := <-answered:
		t.Fatalf("the lost response was answered: %v", err)
	default:
	}
	giveUp()
	require.ErrorIs(t, <-answered, provider.ErrUnknownOutcome)
}

func TestWebhook_DuplicatesShareTheEventID(t *testing.T) {
	rcv := newReceiver(t, testSecret, nil)
	cfg := webhookConfig(rcv)
	cfg.DuplicateWebhookRate = 1
	running := startProvider(t, cfg)

	_, err := provider.NewClient(running.URL, provider.ClientOptions{}).CreateCharge(t.Context(), "dup", visa("pay_dup"))
	require.NoError(t, err)

	events := rcv.waitForEvents(t, provider.EventChargeSucceeded, 2)
	require.Len(t, events, 2)
	require.Equal(t, events[0], events[1])
}

func TestWebhook_RetriedUntilAccepted(t *testing.T) {
	// The receiver fails twice, with a 500 and then a 503, then accepts.
	rcv := newReceiver(t, testSecret, func(attempt int) int {
		switch attempt {
		case 1:
			return http.StatusInternalServerError
		case 2:
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	running := startProvider(t, webhookConfig(rcv))

	_, err := provider.NewClient(running.URL, provider.ClientOptions{}).CreateCharge(t.Context(), "retry", visa("pay_retry"))
	require.NoError(t, err)

	rcv.waitForEvents(t, provider.EventChargeSucceeded, 1)
	running.Server.Close()
	require.Equal(t, 3, rcv.Attempts())
	require.Len(t, rcv.Events(), 1)
}

func TestWebhook_GivesUpAfterMaxAttempts(t *testing.T) {
	rcv := newReceiver(t, testSecret, func(int) int { return http.StatusInternalServerError })
	cfg := webhookConfig(rcv)
	cfg.WebhookMaxAttempts = 3
	running := startProvider(t, cfg)

	_, err := provider.NewClient(running.URL, provider.ClientOptions{}).CreateCharge(t.Context(), "never", visa("pay_never"))
	require.NoError(t, err)

	require.Eventually(t, func() bool { return rcv.Attempts() >= 3 }, waitFor, pollEvery)
	running.Server.Close()
	require.Equal(t, 3, rcv.Attempts())
}

func TestWebhook_Delay(t *testing.T) {
	rcv := newReceiver(t, testSecret, nil)
	cfg := webhookConfig(rcv)
	cfg.WebhookDelay = 300 * time.Millisecond
	running := startProvider(t, cfg)

	start := time.Now()
	_, err := provider.NewClient(running.URL, provider.ClientOptions{}).CreateCharge(t.Context(), "late", visa("pay_late"))
	require.NoError(t, err)

	rcv.waitForEvents(t, provider.EventChargeSucceeded, 1)
	require.GreaterOrEqual(t, time.Since(start), cfg.WebhookDelay)
}

func TestWebhook_CloseStopsRetries(t *testing.T) {
	rcv := newReceiver(t, testSecret, func(int) int { return http.StatusBadGateway })
	cfg := webhookConfig(rcv)
	cfg.WebhookBackoff = time.Hour
	running := startProvider(t, cfg)

	_, err := provider.NewClient(running.URL, provider.ClientOptions{}).CreateCharge(t.Context(), "stop", visa("pay_stop"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rcv.Attempts() == 1 }, waitFor, pollEvery)

	closed := make(chan struct{})
	go func() {
		running.Server.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(waitFor):
		t.Fatal("Close did not stop a delivery waiting to retry")
	}
	require.Equal(t, 1, rcv.Attempts())
}

func TestWebhook_SignedWithTheConfiguredSecret(t *testing.T) {
	// A receiver with another secret refuses every attempt as unsigned.
	rcv := newReceiver(t, "whsec_other", nil)
	cfg := webhookConfig(rcv)
	cfg.WebhookMaxAttempts = 2
	running := startProvider(t, cfg)

	_, err := provider.NewClient(running.URL, provider.ClientOptions{}).CreateCharge(t.Context(), "sig", visa("pay_sig"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rcv.BadSignatures() == 2 }, waitFor, pollEvery)
	require.Empty(t, rcv.Events())
}
