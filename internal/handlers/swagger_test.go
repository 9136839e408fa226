package handlers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	openapi "github.com/idemkeys/payments/api"
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
			`"Idempotency-Key"`, `"Idempotent-Replayed"`, `"Provider-Signature"`, `"BearerAuth"`,
		} {
			require.Contains(t, w.Body.String(), want)
		}
		require.Equal(t, "application/json", w.Header().Get("Content-Type"))
		var doc map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &doc))
		require.Equal(t, "3.1.0", doc["openapi"])
		// Served as committed: no host left empty, no 2.0 members.
		for _, member := range []string{"host", "schemes", "swagger", "basePath"} {
			require.NotContains(t, doc, member)
		}
		require.Equal(t, openapi.OpenAPI, w.Body.Bytes())
	})
	t.Run("Swagger UI 5 on doc.json", func(t *testing.T) {
		w := send(r, http.MethodGet, "/swagger/swagger-initializer.js", "")
		require.Equal(t, http.StatusOK, w.Code)
		require.Contains(t, w.Body.String(), `url: "doc.json"`)
		w = send(r, http.MethodGet, "/swagger/swagger-ui-bundle.js", "")
		require.Equal(t, http.StatusOK, w.Code)
		require.True(t, strings.Contains(w.Body.String(), `"5.18.2"`), "Swagger UI 5.18.2 (swaggo/files/v2), which renders OpenAPI 3.1")
	})
}
