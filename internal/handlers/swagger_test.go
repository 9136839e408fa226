package handlers_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/handlers"
)

func TestSwagger(t *testing.T) {
	r := paymentsRouter(t, &fakePayments{}, nil, nil)
	handlers.RegisterSwagger(r)

	t.Run("the UI, without an API key", func(t *testing.T) {
		w := send(r, http.MethodGet, "/swagger/index.html", "")
		require.Equal(t, http.StatusOK, w.Code)
		require.Contains(t, w.Header().Get("Content-Type"), "text/html")
		require.Contains(t, w.Body.String(), "swagger-ui")
	})
	t.Run("the spec", func(t *testing.T) {
		w := send(r, http.MethodGet, "/swagger/doc.json", "")
		require.Equal(t, http.StatusOK, w.Code)
		for _, want := range []string{
			`"/v1/orders/{id}/payments"`, `"/v1/payments/{id}"`, `"/v1/payments/{id}/refunds"`, `"/v1/webhooks/provider"`,
			`"Idempotency-Key"`, `"Idempotent-Replayed"`, `"Provider-Signature"`, `"ApiKeyAuth"`,
		} {
			require.Contains(t, w.Body.String(), want)
		}
	})
}
