package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/provider"
)

func TestCharge_PaymentMethodOutcomes(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{})

	tests := []struct {
		method      string
		status      provider.ChargeStatus
		declineCode string
	}{
		{provider.MethodCardVisa, provider.ChargeSucceeded, ""},
		{provider.MethodCardDeclined, provider.ChargeDeclined, provider.DeclineCardDeclined},
		{provider.MethodCardInsufficientFunds, provider.ChargeDeclined, provider.DeclineInsufficientFunds},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			req := withMethod(visa("pay_"+tt.method), tt.method)
			charge, err := client.CreateCharge(t.Context(), "key-"+tt.method, req)
			require.NoError(t, err, "a decline is a definitive answer, not an error")
			require.Equal(t, tt.status, charge.Status)
			require.Equal(t, tt.declineCode, charge.DeclineCode)
			require.True(t, strings.HasPrefix(charge.ID, "ch_"), charge.ID)
			require.Equal(t, "charge", charge.Object)
			require.Equal(t, req.Amount, charge.Amount)
			require.Equal(t, req.Currency, charge.Currency)
			require.Equal(t, req.Reference, charge.Reference)
			require.Equal(t, "key-"+tt.method, charge.IdempotencyKey)
			require.NotZero(t, charge.Created)
		})
	}
}

func TestCharge_WireFormat(t *testing.T) {
	running := startProvider(t, provider.Config{})

	resp := doRaw(t, http.MethodPost, running.URL+"/v1/charges",
		map[string]string{"Idempotency-Key": "k1", "Content-Type": "application/json"},
		`{"amount": 1250, "currency": "BRL", "payment_method": "pm_card_declined", "reference": "pay_1"}`)

	require.Equal(t, http.StatusCreated, resp.status)
	require.Equal(t, "application/json", resp.header.Get("Content-Type"))
	require.Empty(t, resp.header.Get("Idempotent-Replayed"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(resp.body, &body))
	for _, field := range []string{"id", "object", "status", "decline_code", "amount", "currency", "reference", "idempotency_key", "created"} {
		require.Contains(t, body, field)
	}
	require.Equal(t, "declined", body["status"])
	require.Equal(t, "card_declined", body["decline_code"])
	require.EqualValues(t, 1250, body["amount"])
}

func TestCharge_ReplayReturnsTheSameCharge(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{})

	first, err := client.CreateCharge(t.Context(), "replay-key", visa("pay_replay"))
	require.NoError(t, err)
	second, err := client.CreateCharge(t.Context(), "replay-key", visa("pay_replay"))
	require.NoError(t, err)
	require.Equal(t, first, second)

	// On the wire the replay is 201 again, with the header that says so.
	resp := doRaw(t, http.MethodPost, running.URL+"/v1/charges",
		map[string]string{"Idempotency-Key": "replay-key"}, visa("pay_replay"))
	require.Equal(t, http.StatusCreated, resp.status)
	require.Equal(t, "true", resp.header.Get("Idempotent-Replayed"))

	// The same body with other spacing and member order is the same request.
	resp = doRaw(t, http.MethodPost, running.URL+"/v1/charges", map[string]string{"Idempotency-Key": "replay-key"},
		`{ "reference":"pay_replay","payment_method":"pm_card_visa","currency":"BRL","amount":2500 }`)
	require.Equal(t, http.StatusCreated, resp.status)

	require.Len(t, running.Server.ChargesByReference("pay_replay"), 1)
}

func TestCharge_ConcurrentRequestsWithOneKeyChargeOnce(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{})

	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			charge, err := client.CreateCharge(t.Context(), "race-key", visa("pay_race"))
			if err == nil {
				ids[i] = charge.ID
			}
		})
	}
	wg.Wait()

	charges := running.Server.ChargesByReference("pay_race")
	require.Len(t, charges, 1)
	for _, id := range ids {
		require.Equal(t, charges[0].ID, id)
	}
}

func TestCharge_KeyReusedForADifferentRequest(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{})
	original, err := client.CreateCharge(t.Context(), "reused", visa("pay_reused"))
	require.NoError(t, err)

	other := visa("pay_reused")
	other.Amount++
	tests := []struct {
		name   string
		target string
		body   any
	}{
		{"other amount", "/v1/charges", other},
		{"other method", "/v1/charges", withMethod(visa("pay_reused"), provider.MethodCardDeclined)},
		{"other endpoint", "/v1/refunds", provider.RefundRequest{Charge: original.ID, Amount: 1, Reference: "re_1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := doRaw(t, http.MethodPost, running.URL+tt.target, map[string]string{"Idempotency-Key": "reused"}, tt.body)
			requireProblem(t, resp, http.StatusUnprocessableEntity, provider.CodeIdempotencyKeyReused)
		})
	}

	t.Run("through the client", func(t *testing.T) {
		_, err := client.CreateCharge(t.Context(), "reused", other)
		var apiErr *provider.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, http.StatusUnprocessableEntity, apiErr.Status)
		require.Equal(t, provider.CodeIdempotencyKeyReused, apiErr.Code)
		require.Equal(t, "definitive", errorKind(t, err))
	})
	require.Len(t, running.Server.ChargesByReference("pay_reused"), 1)
}

func TestCharge_InvalidRequests(t *testing.T) {
	running := startProvider(t, provider.Config{})
	valid := `{"amount": 100, "currency": "BRL", "payment_method": "pm_card_visa", "reference": "pay_bad"}`

	tests := []struct {
		name    string
		headers map[string]string // nil: a fresh valid key
		body    string
		status  int
		code    string
		field   string // the field named in errors, if any
	}{
		{"missing key", map[string]string{}, valid, 400, provider.CodeIdempotencyKeyMissing, ""},
		{"empty key", map[string]string{"Idempotency-Key": ""}, valid, 400, provider.CodeIdempotencyKeyInvalid, ""},
		{"key with a space", map[string]string{"Idempotency-Key": "a b"}, valid, 400, provider.CodeIdempotencyKeyInvalid, ""},
		{"key too long", map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, valid, 400, provider.CodeIdempotencyKeyInvalid, ""},
		{"malformed JSON", nil, `{"amount": `, 400, provider.CodeValidationFailed, ""},
		{"not an object", nil, `[1, 2]`, 400, provider.CodeValidationFailed, ""},
		{"unknown field", nil, `{"amount": 100, "currency": "BRL", "payment_method": "pm_card_visa", "reference": "r", "tip": 5}`, 400, provider.CodeValidationFailed, ""},
		{"trailing data", nil, valid + ` {}`, 400, provider.CodeValidationFailed, ""},
		{"fractional amount", nil, `{"amount": 1.5, "currency": "BRL", "payment_method": "pm_card_visa", "reference": "r"}`, 400, provider.CodeValidationFailed, ""},
		{"zero amount", nil, `{"amount": 0, "currency": "BRL", "payment_method": "pm_card_visa", "reference": "r"}`, 400, provider.CodeValidationFailed, "amount"},
		{"lower-case currency", nil, `{"amount": 1, "currency": "brl", "payment_method": "pm_card_visa", "reference": "r"}`, 400, provider.CodeValidationFailed, "currency"},
		{"unknown payment method", nil, `{"amount": 1, "currency": "BRL", "payment_method": "pm_card_amex", "reference": "r"}`, 400, provider.CodeValidationFailed, "payment_method"},
		{"no reference", nil, `{"amount": 1, "currency": "BRL", "payment_method": "pm_card_visa"}`, 400, provider.CodeValidationFailed, "reference"},
		{"too large", nil, `{"reference": "` + strings.Repeat("x", 70<<10) + `"}`, 413, provider.CodeRequestTooLarge, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			headers := tt.headers
			if headers == nil {
				headers = map[string]string{"Idempotency-Key": "bad-" + strings.ReplaceAll(tt.name, " ", "-")}
			}
			resp := doRaw(t, http.MethodPost, running.URL+"/v1/charges", headers, tt.body)
			problem := requireProblem(t, resp, tt.status, tt.code)
			if tt.field != "" {
				require.Contains(t, string(resp.body), `"field":"`+tt.field+`"`, problem)
			}
		})
	}

	t.Run("a refused request binds no key", func(t *testing.T) {
		key := map[string]string{"Idempotency-Key": "bad-unknown-payment-method"}
		resp := doRaw(t, http.MethodPost, running.URL+"/v1/charges", key, valid)
		require.Equal(t, http.StatusCreated, resp.status, "%s", resp.body)
	})
}

func TestCharge_Lookups(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{})
	first, err := client.CreateCharge(t.Context(), "lookup-1", visa("pay_lookup"))
	require.NoError(t, err)
	// A second attempt for the same payment under a new key: a second charge.
	second, err := client.CreateCharge(t.Context(), "lookup-2", withMethod(visa("pay_lookup"), provider.MethodCardDeclined))
	require.NoError(t, err)

	t.Run("by key", func(t *testing.T) {
		got, err := client.GetChargeByKey(t.Context(), "lookup-1")
		require.NoError(t, err)
		require.Equal(t, first, got)
	})
	t.Run("by unknown key", func(t *testing.T) {
		_, err := client.GetChargeByKey(t.Context(), "never-used")
		require.ErrorIs(t, err, provider.ErrNotFound)
		require.Equal(t, "definitive", errorKind(t, err))
		requireProblem(t, doRaw(t, http.MethodGet, running.URL+"/v1/charges?idempotency_key=never-used", nil, nil),
			http.StatusNotFound, provider.CodeNotFound)
	})
	t.Run("by reference", func(t *testing.T) {
		got, err := client.ListChargesByReference(t.Context(), "pay_lookup")
		require.NoError(t, err)
		require.Equal(t, []provider.Charge{first, second}, got)
	})
	t.Run("by unknown reference is an empty list", func(t *testing.T) {
		resp := doRaw(t, http.MethodGet, running.URL+"/v1/charges?reference=pay_none", nil, nil)
		require.Equal(t, http.StatusOK, resp.status)
		require.JSONEq(t, `{"object": "list", "data": []}`, string(resp.body))
	})
	t.Run("by id", func(t *testing.T) {
		resp := doRaw(t, http.MethodGet, running.URL+"/v1/charges/"+first.ID, nil, nil)
		require.Equal(t, http.StatusOK, resp.status)
		var got provider.Charge
		require.NoError(t, json.Unmarshal(resp.body, &got))
		require.Equal(t, first, got)
		requireProblem(t, doRaw(t, http.MethodGet, running.URL+"/v1/charges/ch_nope", nil, nil), http.StatusNotFound, provider.CodeNotFound)
	})
	t.Run("without a filter", func(t *testing.T) {
		requireProblem(t, doRaw(t, http.MethodGet, running.URL+"/v1/charges", nil, nil), http.StatusBadRequest, provider.CodeValidationFailed)
	})
	t.Run("wrong method and unknown path", func(t *testing.T) {
		resp := doRaw(t, http.MethodDelete, running.URL+"/v1/charges", nil, nil)
		requireProblem(t, resp, http.StatusMethodNotAllowed, provider.CodeMethodNotAllowed)
		require.Equal(t, "GET, POST", resp.header.Get("Allow"))
		requireProblem(t, doRaw(t, http.MethodGet, running.URL+"/v2/nothing", nil, nil), http.StatusNotFound, provider.CodeNotFound)
	})
	t.Run("health", func(t *testing.T) {
		require.Equal(t, http.StatusOK, doRaw(t, http.MethodGet, running.URL+"/healthz", nil, nil).status)
	})
}

func TestCharge_LostResponse(t *testing.T) {
	running := startProvider(t, provider.Config{})
	impatient := provider.NewClient(running.URL, provider.ClientOptions{Timeout: 500 * time.Millisecond})
	req := withMethod(visa("pay_lost"), provider.MethodFaultLostResponse)

	_, err := impatient.CreateCharge(t.Context(), "lost-key", req)
	require.ErrorIs(t, err, provider.ErrUnknownOutcome)
	require.Equal(t, "unknown", errorKind(t, err))

	// The charge was made all the same: a lookup by key settles it.
	made, err := impatient.GetChargeByKey(t.Context(), "lost-key")
	require.NoError(t, err)
	require.Equal(t, provider.ChargeSucceeded, made.Status)

	// A retry under the key answers at once, well inside the short timeout,
	// with the same charge.
	retried, err := impatient.CreateCharge(t.Context(), "lost-key", req)
	require.NoError(t, err)
	require.Equal(t, made, retried)
	require.Len(t, running.Server.ChargesByReference("pay_lost"), 1)
}

func TestCharge_LostResponseIsHeldOnlyUpToTheCap(t *testing.T) {
	running := startProvider(t, provider.Config{LostResponseHold: 100 * time.Millisecond})
	client := provider.NewClient(running.URL, provider.ClientOptions{Timeout: waitFor})

	charge, err := client.CreateCharge(t.Context(), "capped", withMethod(visa("pay_capped"), provider.MethodFaultLostResponse))
	require.NoError(t, err, "a client that outwaits the cap gets the answer")
	require.Equal(t, provider.ChargeSucceeded, charge.Status)
}

func TestCharge_Unavailable(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{})
	req := withMethod(visa("pay_down"), provider.MethodFaultUnavailable)

	_, err := client.CreateCharge(t.Context(), "down-key", req)
	require.ErrorIs(t, err, provider.ErrNotExecuted)
	require.Equal(t, "not_executed", errorKind(t, err))
	require.Empty(t, running.Server.ChargesByReference("pay_down"), "a 503 has no effect")
	_, err = client.GetChargeByKey(t.Context(), "down-key")
	require.ErrorIs(t, err, provider.ErrNotFound)

	charge, err := client.CreateCharge(t.Context(), "down-key", req)
	require.NoError(t, err)
	require.Equal(t, provider.ChargeSucceeded, charge.Status)
	require.Len(t, running.Server.ChargesByReference("pay_down"), 1)

	// The 503 itself, on the wire.
	resp := doRaw(t, http.MethodPost, running.URL+"/v1/charges", map[string]string{"Idempotency-Key": "down-2"}, req)
	requireProblem(t, resp, http.StatusServiceUnavailable, provider.CodeUnavailable)
	require.NotEmpty(t, resp.header.Get("Retry-After"))
}

func TestCharge_Slow(t *testing.T) {
	t.Run("charges at once and answers late", func(t *testing.T) {
		const delay = 300 * time.Millisecond
		running := startProvider(t, provider.Config{SlowDelay: delay})
		client := provider.NewClient(running.URL, provider.ClientOptions{})
		req := withMethod(visa("pay_slow"), provider.MethodFaultSlow)

		start := time.Now()
		charge, err := client.CreateCharge(t.Context(), "slow-key", req)
		require.NoError(t, err)
		require.Equal(t, provider.ChargeSucceeded, charge.Status)
		require.GreaterOrEqual(t, time.Since(start), delay)

		start = time.Now()
		again, err := client.CreateCharge(t.Context(), "slow-key", req)
		require.NoError(t, err)
		require.Equal(t, charge, again)
		require.Less(t, time.Since(start), delay, "later requests under the key answer at once")
	})

	t.Run("visible before the answer, and kept when the client gives up", func(t *testing.T) {
		running := startProvider(t, provider.Config{SlowDelay: time.Minute})
		client := provider.NewClient(running.URL, provider.ClientOptions{Timeout: time.Minute})
		req := withMethod(visa("pay_slow2"), provider.MethodFaultSlow)

		ctx, giveUp := context.WithCancel(t.Context())
		defer giveUp()
		answered := make(chan error, 1)
		go func() {
			_, err := client.CreateCharge(ctx, "slow-key-2", req)
			answered <- err
		}()

		var made provider.Charge
		require.Eventually(t, func() bool {
			var err error
			made, err = client.GetChargeByKey(t.Context(), "slow-key-2")
			return err == nil
		}, waitFor, pollEvery)
		select {
		case err := <-answered:
			t.Fatalf("the slow charge answered early: %v", err)
		default:
		}

		giveUp()
		select {
		case err := <-answered:
			require.ErrorIs(t, err, provider.ErrUnknownOutcome)
		case <-time.After(waitFor):
			t.Fatal("the cancelled call did not return")
		}

		again, err := client.CreateCharge(t.Context(), "slow-key-2", req)
		require.NoError(t, err)
		require.Equal(t, made, again)
		require.Len(t, running.Server.ChargesByReference("pay_slow2"), 1)
	})
}

func TestCharge_KeysAreIndependent(t *testing.T) {
	running := startProvider(t, provider.Config{})
	client := provider.NewClient(running.URL, provider.ClientOptions{})
	// A fault fires once per key, not once per provider.
	for _, key := range []string{"a", "b"} {
		_, err := client.CreateCharge(t.Context(), key, withMethod(visa("pay_keys"), provider.MethodFaultUnavailable))
		require.True(t, errors.Is(err, provider.ErrNotExecuted), "key %s: %v", key, err)
	}
}

// TestCreatedAfter lists the charges and the refunds made after a moment,
// as a sweep after a database failover asks for them: strictly after it, to
// the second, oldest first, whatever their reference or key.
func TestCreatedAfter(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	running := startProvider(t, provider.Config{Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}})
	at := func(unix int64) {
		mu.Lock()
		now = time.Unix(unix, 0)
		mu.Unlock()
	}
	client := provider.NewClient(running.URL, provider.ClientOptions{})
	at(1_800_000_000)
	old, err := client.CreateCharge(t.Context(), "swept-0", visa("pay_old"))
	require.NoError(t, err)
	at(1_800_000_010)
	first, err := client.CreateCharge(t.Context(), "swept-1", visa("pay_1"))
	require.NoError(t, err)
	at(1_800_000_011)
	second, err := client.CreateCharge(t.Context(), "swept-2", withMethod(visa("pay_2"), provider.MethodCardDeclined))
	require.NoError(t, err)
	_, err = client.CreateRefund(t.Context(), "refund-old", provider.RefundRequest{Charge: old.ID, Amount: 100, Reference: "re_old"})
	require.NoError(t, err)
	at(1_800_000_012)
	refund, err := client.CreateRefund(t.Context(), "refund-1", provider.RefundRequest{Charge: first.ID, Amount: 100, Reference: "re_1"})
	require.NoError(t, err)

	charges, err := client.ListChargesCreatedAfter(t.Context(), time.Unix(1_800_000_009, 0))
	require.NoError(t, err)
	require.Equal(t, []provider.Charge{first, second}, charges)
	charges, err = client.ListChargesCreatedAfter(t.Context(), time.Unix(1_800_000_010, 0))
	require.NoError(t, err)
	require.Equal(t, []provider.Charge{second}, charges, "strictly after")
	refunds, err := client.ListRefundsCreatedAfter(t.Context(), time.Unix(1_800_000_011, 0))
	require.NoError(t, err)
	require.Equal(t, []provider.Refund{refund}, refunds)

	resp := doRaw(t, http.MethodGet, running.URL+"/v1/charges?created_after=1800000011", nil, nil)
	require.Equal(t, http.StatusOK, resp.status)
	require.JSONEq(t, `{"object": "list", "data": []}`, string(resp.body), "an empty list, not null")

	for _, bad := range []string{"created_after=", "created_after=-1", "created_after=1.5", "created_after=yesterday",
		"created_after=99999999999999999999", "created_after=1&reference=pay_1", "idempotency_key=k&created_after=1"} {
		for _, noun := range []string{"charges", "refunds"} {
			requireProblem(t, doRaw(t, http.MethodGet, running.URL+"/v1/"+noun+"?"+bad, nil, nil),
				http.StatusBadRequest, provider.CodeValidationFailed)
		}
	}
}
