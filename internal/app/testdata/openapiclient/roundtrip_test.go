// The round trip through the generated Go client. This file is not built
// with the project: internal/app's TestGeneratedClientRoundTrip generates
// the client from api/swagger.json with oapi-codegen into a temporary
// module, copies this file beside it, and runs it against an API it
// started (API_URL, API_KEY).
package openapiclient_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"roundtrip/openapiclient"
)

// TestRoundTrip drives the API as a team that generates its client would:
// every answer must decode into its typed field, nulls included, and the
// problems into theirs.
func TestRoundTrip(t *testing.T) {
	apiURL, apiKey := os.Getenv("API_URL"), os.Getenv("API_KEY")
	if apiURL == "" {
		t.Skip("run by internal/app's TestGeneratedClientRoundTrip, which sets API_URL")
	}
	c, err := openapiclient.NewClientWithResponses(apiURL, openapiclient.WithRequestEditorFn(
		func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+apiKey)
			return nil
		}))
	require.NoError(t, err)
	ctx := context.Background()

	key := "order-" + newKey()
	order := openapiclient.CreateOrderJSONRequestBody{
		CustomerId: "cus_1", Currency: openapiclient.HandlersCreateOrderRequestCurrency("BRL"),
		Items: []openapiclient.HandlersOrderItem{{Sku: "SKU-1", Name: "Coffee", Quantity: 2, UnitAmount: 1250}},
	}
	created, err := c.CreateOrderWithResponse(ctx, &openapiclient.CreateOrderParams{IdempotencyKey: key}, order)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), string(created.Body))
	require.NotNil(t, created.JSON201, "the 201 did not decode: %s", created.Body)
	o := created.JSON201
	require.Equal(t, openapiclient.HandlersOrderResponseStatus("pending_payment"), o.Status)
	require.Equal(t, 2500, o.AmountTotal)
	require.Nil(t, o.ShippingAddress, "shipping_address is null until set")
	require.Equal(t, "/v1/orders/"+o.Id, created.HTTPResponse.Header.Get("Location"))

	replayed, err := c.CreateOrderWithResponse(ctx, &openapiclient.CreateOrderParams{IdempotencyKey: key}, order)
	require.NoError(t, err)
	require.NotNil(t, replayed.JSON201, string(replayed.Body))
	require.Equal(t, "true", replayed.HTTPResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, created.Body, replayed.Body, "a replay is byte-identical")

	other := order
	other.CustomerId = "cus_2"
	reused, err := c.CreateOrderWithResponse(ctx, &openapiclient.CreateOrderParams{IdempotencyKey: key}, other)
	require.NoError(t, err)
	require.NotNil(t, reused.ApplicationproblemJSON422, "the 422 did not decode: %s", reused.Body)
	require.Equal(t, openapiclient.HandlersProblem422Code("idempotency_key_reused"), reused.ApplicationproblemJSON422.Code)

	paid, err := c.PayOrderWithResponse(ctx, o.Id, &openapiclient.PayOrderParams{IdempotencyKey: "pay-" + newKey()},
		openapiclient.PayOrderJSONRequestBody{PaymentMethod: "pm_card_visa"})
	require.NoError(t, err)
	require.NotNil(t, paid.JSON201, "the 201 did not decode: %s", paid.Body)
	require.Equal(t, openapiclient.HandlersPaymentResponseStatus("succeeded"), paid.JSON201.Status)
	require.NotNil(t, paid.JSON201.ProviderChargeId)
	require.Nil(t, paid.JSON201.DeclineCode, "decline_code is null unless failed")

	read, err := c.GetPaymentWithResponse(ctx, paid.JSON201.Id)
	require.NoError(t, err)
	require.NotNil(t, read.JSON200, string(read.Body))
	require.Equal(t, *paid.JSON201, *read.JSON200)

	second, err := c.CreateOrderWithResponse(ctx, &openapiclient.CreateOrderParams{IdempotencyKey: "order-" + newKey()}, order)
	require.NoError(t, err)
	require.NotNil(t, second.JSON201, string(second.Body))
	declined, err := c.PayOrderWithResponse(ctx, second.JSON201.Id, &openapiclient.PayOrderParams{IdempotencyKey: "pay-" + newKey()},
		openapiclient.PayOrderJSONRequestBody{PaymentMethod: "pm_card_declined"})
	require.NoError(t, err)
	p := declined.ApplicationproblemJSON402
	require.NotNil(t, p, "the 402 did not decode: %s", declined.Body)
	require.Equal(t, openapiclient.HandlersProblem402Code("payment_declined"), p.Code)
	require.Equal(t, "card_declined", p.DeclineCode)
	failed, err := c.GetPaymentWithResponse(ctx, p.PaymentId)
	require.NoError(t, err)
	require.NotNil(t, failed.JSON200, string(failed.Body))
	require.Equal(t, openapiclient.HandlersPaymentResponseStatus("failed"), failed.JSON200.Status)
	require.Equal(t, "card_declined", *failed.JSON200.DeclineCode)

	record, err := c.GetIdempotencyKeyWithResponse(ctx, key)
	require.NoError(t, err)
	require.NotNil(t, record.JSON200, string(record.Body))
	require.Nil(t, record.JSON200.LockedUntil, "completed: locked_until is null")
	require.NotNil(t, record.JSON200.Response)
}

func newKey() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
