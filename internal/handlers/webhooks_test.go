package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/problem"
	"github.com/idemkeys/payments/internal/provider"
	"github.com/idemkeys/payments/internal/provider/paymentsport"
)

const webhookPath = "/v1/webhooks/provider"

// eventBody is an event as the provider sends it, built from the provider's
// own types so that the test follows its wire format.
func eventBody(t *testing.T, id, eventType string, object any) string {
	t.Helper()
	obj, err := json.Marshal(object)
	require.NoError(t, err)
	body, err := json.Marshal(provider.Event{ID: id, Type: eventType, Created: time.Now().Unix(), Data: provider.EventData{Object: obj}})
	require.NoError(t, err)
	return string(body)
}

var (
	succeededCharge = provider.Charge{ID: "ch_1", Object: "charge", Status: provider.ChargeSucceeded, Amount: 2500, Currency: "BRL",
		PaymentMethod: provider.MethodCardVisa, Reference: "pay_1", IdempotencyKey: "pk_1", Created: 1748779200}
	declinedCharge = provider.Charge{ID: "ch_2", Object: "charge", Status: provider.ChargeDeclined, DeclineCode: provider.DeclineCardDeclined,
		Amount: 2500, Currency: "BRL", PaymentMethod: provider.MethodCardDeclined, Reference: "pay_2", IdempotencyKey: "pk_2", Created: 1748779200}
	succeededRefund = provider.Refund{ID: "rf_1", Object: "refund", Status: provider.RefundSucceeded, Charge: "ch_1", Amount: 1000,
		Currency: "BRL", Reference: "re_1", IdempotencyKey: "pk_3", Created: 1748779200}
)

// signedPost sends body to the webhook signed at the given time.
func signedPost(r http.Handler, body string, at time.Time) *httptest.ResponseRecorder {
	return send(r, http.MethodPost, webhookPath, body, "Content-Type", "application/json",
		handlers.HeaderProviderSignature, provider.Sign(webhookSecret, at, []byte(body)))
}

func TestWebhookAppliesEvents(t *testing.T) {
	tests := []struct {
		name string
		body func(t *testing.T) string
		want payments.ProviderEvent
	}{
		{"charge succeeded", func(t *testing.T) string {
			return eventBody(t, "evt_1", provider.EventChargeSucceeded, succeededCharge)
		},
			payments.ProviderEvent{ID: "evt_1", Type: "charge.succeeded", Charge: &payments.ChargeResult{
				ChargeID: "ch_1", Succeeded: true, Reference: "pay_1", Key: "pk_1", Amount: 2500, Currency: "BRL"}}},
		{"charge declined", func(t *testing.T) string { return eventBody(t, "evt_2", provider.EventChargeDeclined, declinedCharge) },
			payments.ProviderEvent{ID: "evt_2", Type: "charge.declined", Charge: &payments.ChargeResult{
				ChargeID: "ch_2", Succeeded: false, DeclineCode: "card_declined", Reference: "pay_2", Key: "pk_2", Amount: 2500, Currency: "BRL"}}},
		{"refund succeeded", func(t *testing.T) string {
			return eventBody(t, "evt_3", provider.EventRefundSucceeded, succeededRefund)
		},
			payments.ProviderEvent{ID: "evt_3", Type: "refund.succeeded", Refund: &payments.RefundResult{
				RefundID: "rf_1", Succeeded: true, Reference: "re_1", Key: "pk_3", Amount: 1000, Currency: "BRL"}}},
		{"members the API does not know are fine", func(t *testing.T) string {
			return `{"id":"evt_4","type":"charge.succeeded","created":1,"livemode":false,"data":{"object":` +
				`{"id":"ch_1","object":"charge","status":"succeeded","amount":2.5e3,"currency":"BRL","reference":"pay_1","idempotency_key":"pk_1","risk_score":12}}}`
		}, payments.ProviderEvent{ID: "evt_4", Type: "charge.succeeded", Charge: &payments.ChargeResult{
			ChargeID: "ch_1", Succeeded: true, Reference: "pay_1", Key: "pk_1", Amount: 2500, Currency: "BRL"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &fakePayments{}
			r := paymentsRouter(t, svc, nil, nil)
			w := signedPost(r, tt.body(t), time.Now())
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			require.JSONEq(t, `{"received":true}`, w.Body.String())
			require.Equal(t, []payments.ProviderEvent{tt.want}, svc.Events())
		})
	}

	t.Run("a repeat is acknowledged too", func(t *testing.T) {
		svc := &fakePayments{apply: func(payments.ProviderEvent) (payments.EventOutcome, error) { return payments.EventRepeat, nil }}
		r := paymentsRouter(t, svc, nil, nil)
		w := signedPost(r, eventBody(t, "evt_1", provider.EventChargeSucceeded, succeededCharge), time.Now())
		require.Equal(t, http.StatusOK, w.Code)
		require.JSONEq(t, `{"received":true}`, w.Body.String())
	})

	t.Run("an unknown type is acknowledged and ignored", func(t *testing.T) {
		svc := &fakePayments{}
		r := paymentsRouter(t, svc, nil, nil)
		w := signedPost(r, `{"id":"evt_9","type":"charge.disputed","created":1,"data":{"object":{"id":"dp_1","object":"dispute"}}}`, time.Now())
		require.Equal(t, http.StatusOK, w.Code)
		require.JSONEq(t, `{"received":true}`, w.Body.String())
		require.Zero(t, svc.Calls("apply"))
	})
}

func TestWebhookRefusesBadSignatures(t *testing.T) {
	svc := &fakePayments{}
	r := paymentsRouter(t, svc, nil, nil)
	body := eventBody(t, "evt_1", provider.EventChargeSucceeded, succeededCharge)
	now := time.Now()
	tests := []struct {
		name   string
		header string
		body   string
	}{
		{"missing", "", body},
		{"malformed", "v1=abc", body},
		{"another secret", provider.Sign("whsec_other", now, []byte(body)), body},
		{"another body", provider.Sign(webhookSecret, now, []byte(body)), strings.Replace(body, `"pay_1"`, `"pay_2"`, 1)},
		{"too old", provider.Sign(webhookSecret, now.Add(-6*time.Minute), []byte(body)), body},
		{"too far ahead", provider.Sign(webhookSecret, now.Add(6*time.Minute), []byte(body)), body},
		{"not even JSON, unsigned", "", `{{{`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := send(r, http.MethodPost, webhookPath, tt.body, "Content-Type", "application/json", handlers.HeaderProviderSignature, tt.header)
			p := requireProblem(t, w, http.StatusUnauthorized, "invalid_signature")
			require.NotContains(t, p.Detail, "mismatch", "the reason is logged, not answered")
			require.Empty(t, w.Header().Get("WWW-Authenticate"))
		})
	}
	require.Zero(t, svc.Calls("apply"))

	t.Run("no API key is needed, and one does not replace the signature", func(t *testing.T) {
		w := send(r, http.MethodPost, webhookPath, body, "Content-Type", "application/json", "Authorization", "Bearer "+acmeKey)
		requireProblem(t, w, http.StatusUnauthorized, "invalid_signature")
	})
	t.Run("a body not declared as JSON is 415, signed or not", func(t *testing.T) {
		for _, contentType := range []string{"", "text/plain", "application/merge-patch+json"} {
			w := send(r, http.MethodPost, webhookPath, body, "Content-Type", contentType,
				handlers.HeaderProviderSignature, provider.Sign(webhookSecret, now, []byte(body)))
			requireProblem(t, w, http.StatusUnsupportedMediaType, "unsupported_media_type")
		}
		require.Zero(t, svc.Calls("apply"))
	})
	t.Run("the body limit applies", func(t *testing.T) {
		huge := strings.Repeat(" ", maxBody+1)
		requireProblem(t, signedPost(r, huge, now), http.StatusRequestEntityTooLarge, "request_too_large")
	})
}

func TestWebhookRefusesUnreadableEvents(t *testing.T) {
	svc := &fakePayments{}
	r := paymentsRouter(t, svc, nil, nil)
	charge := func(mutate func(*provider.Charge)) provider.Charge {
		c := succeededCharge
		mutate(&c)
		return c
	}
	tests := []struct {
		name   string
		body   string
		fields []problem.FieldError
	}{
		{name: "not JSON", body: `{"id":`},
		{name: "not an object", body: `["evt_1"]`},
		{name: "no id, type or created", body: `{"data":{"object":{}}}`, fields: []problem.FieldError{
			{Field: "created", Message: "is required"}, {Field: "id", Message: "is required"}, {Field: "type", Message: "is required"}}},
		{name: "empty id and type", body: `{"id":"","type":"","created":1,"data":{"object":{}}}`, fields: []problem.FieldError{
			{Field: "id", Message: "is required"}, {Field: "type", Message: "is required"}}},
		{name: "created not an integer", body: `{"id":"evt_1","type":"x","created":1.5,"data":{"object":{}}}`,
			fields: []problem.FieldError{{Field: "created", Message: "must be a whole number"}}},
		{name: "object is not an object", body: `{"id":"evt_1","type":"charge.succeeded","created":1,"data":{"object":"ch_1"}}`,
			fields: []problem.FieldError{{Field: "data.object", Message: "must be an object"}}},
		{name: "no object, whatever the type", body: `{"id":"evt_1","type":"dispute.created","created":1,"data":{}}`,
			fields: []problem.FieldError{{Field: "data.object", Message: "is required"}}},
		{name: "a charge without amount or currency",
			body: `{"id":"evt_1","type":"charge.succeeded","created":1,"data":{"object":{"id":"ch_1","object":"charge","status":"succeeded","reference":"pay_1"}}}`,
			fields: []problem.FieldError{
				{Field: "data.object.amount", Message: "is required"}, {Field: "data.object.currency", Message: "is required"}}},
		{name: "the type and the status disagree",
			body:   eventBody(t, "evt_1", provider.EventChargeSucceeded, charge(func(c *provider.Charge) { c.Status = provider.ChargeDeclined })),
			fields: []problem.FieldError{{Field: "data.object.status", Message: `must be "succeeded" for this event type`}}},
		{name: "a refund in a charge event",
			body:   eventBody(t, "evt_1", provider.EventChargeSucceeded, succeededRefund),
			fields: []problem.FieldError{{Field: "data.object.object", Message: `must be "charge" for this event type`}}},
		{name: "a charge without id or reference",
			body: eventBody(t, "evt_1", provider.EventChargeSucceeded, charge(func(c *provider.Charge) { c.ID, c.Reference = "", "" })),
			fields: []problem.FieldError{
				{Field: "data.object.id", Message: "is required"}, {Field: "data.object.reference", Message: "is required"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := requireProblem(t, signedPost(r, tt.body, time.Now()), http.StatusBadRequest, "validation_failed")
			require.Equal(t, tt.fields, p.Errors)
		})
	}
	require.Zero(t, svc.Calls("apply"))
}

func TestWebhookServiceErrors(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("apply event evt_1: %w", database.ErrUnavailable), http.StatusServiceUnavailable, "service_unavailable"},
		{errors.New("boom"), http.StatusInternalServerError, "internal_error"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			svc := &fakePayments{apply: func(payments.ProviderEvent) (payments.EventOutcome, error) { return "", tt.err }}
			r := paymentsRouter(t, svc, nil, nil)
			w := signedPost(r, eventBody(t, "evt_1", provider.EventChargeSucceeded, succeededCharge), time.Now())
			requireProblem(t, w, tt.status, tt.code)
		})
	}
}

// TestWebhookFromTheProvider lets the mock provider deliver its real,
// signed events, each of them twice, to the router.
func TestWebhookFromTheProvider(t *testing.T) {
	svc := &fakePayments{}
	api := httptest.NewServer(paymentsRouter(t, svc, nil, nil))
	t.Cleanup(api.Close)
	running, err := provider.StartInProcess(t.Context(), provider.Config{
		WebhookURL: api.URL + webhookPath, WebhookSecret: webhookSecret, DuplicateWebhookRate: 1,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, running.Shutdown(ctx))
	})
	port := paymentsport.New(provider.NewClient(running.URL, provider.ClientOptions{}))

	charge, err := port.Charge(t.Context(), "pk_visa", payments.ChargeRequest{Amount: 2500, Currency: "BRL", PaymentMethod: provider.MethodCardVisa, Reference: "pay_1"})
	require.NoError(t, err)
	declined, err := port.Charge(t.Context(), "pk_declined", payments.ChargeRequest{Amount: 2500, Currency: "BRL", PaymentMethod: provider.MethodCardDeclined, Reference: "pay_2"})
	require.NoError(t, err)
	refund, err := port.Refund(t.Context(), "pk_refund", payments.RefundRequest{ChargeID: charge.ChargeID, Amount: 1000, Reference: "re_1"})
	require.NoError(t, err)

	byType := func() map[string][]payments.ProviderEvent {
		out := map[string][]payments.ProviderEvent{}
		for _, ev := range svc.Events() {
			out[ev.Type] = append(out[ev.Type], ev)
		}
		return out
	}
	require.Eventually(t, func() bool {
		got := byType()
		return len(got["charge.succeeded"]) == 2 && len(got["charge.declined"]) == 2 && len(got["refund.succeeded"]) == 2
	}, 5*time.Second, 5*time.Millisecond, "each event, twice")

	got := byType()
	for typ, want := range map[string]payments.ProviderEvent{
		"charge.succeeded": {Type: "charge.succeeded", Charge: &charge},
		"charge.declined":  {Type: "charge.declined", Charge: &declined},
		"refund.succeeded": {Type: "refund.succeeded", Refund: &refund},
	} {
		evs := got[typ]
		require.Equal(t, evs[0].ID, evs[1].ID, "a repeat delivery carries the same id")
		require.True(t, strings.HasPrefix(evs[0].ID, "evt_"), evs[0].ID)
		want.ID = evs[0].ID
		require.Equal(t, want, evs[0], "the webhook tells what the API's own call was told")
	}
}
