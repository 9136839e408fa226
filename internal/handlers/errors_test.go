package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/merchants"
	"github.com/idemkeys/payments/internal/payments"
	"github.com/idemkeys/payments/internal/problem"
)

func TestRenderError(t *testing.T) {
	gin.SetMode(gin.TestMode)
	secret := "pq: password authentication failed for user secret_user"

	tests := []struct {
		name    string
		err     error
		status  int
		code    string
		detail  string            // "" = not checked
		headers map[string]string // expected headers
		fields  []problem.FieldError
	}{
		{name: "key missing", err: idempotency.ErrKeyMissing, status: 400, code: "idempotency_key_missing"},
		{name: "key invalid says why", err: fmt.Errorf("%w: the key is longer than 255 characters", idempotency.ErrKeyInvalid), status: 400,
			code: "idempotency_key_invalid", detail: "idempotency key invalid: the key is longer than 255 characters"},
		{name: "key invalid, joined", err: errors.Join(idempotency.ErrKeyInvalid, errors.New("the header is repeated")),
			status: 400, code: "idempotency_key_invalid", detail: "idempotency key invalid: the header is repeated"},
		{name: "key reused", err: idempotency.ErrKeyReused, status: 422, code: "idempotency_key_reused"},
		{name: "in progress waits at least a second", err: idempotency.ErrInProgress,
			status: 409, code: "idempotency_request_in_progress", headers: map[string]string{"Retry-After": "1"}},
		{name: "malformed body", err: fmt.Errorf("%w: the body repeats a member name", idempotency.ErrMalformedBody),
			status: 400, code: "validation_failed", detail: "malformed JSON body: the body repeats a member name"},
		{name: "domain validation", err: fmt.Errorf("create order: %w", &payments.ValidationError{Fields: []payments.FieldError{{Field: "items[0].quantity", Message: "must be between 1 and 10000"}}}),
			status: 400, code: "validation_failed", detail: "The request has 1 invalid field.",
			fields: []problem.FieldError{{Field: "items[0].quantity", Message: "must be between 1 and 10000"}}},
		{name: "request validation", err: &requestError{fields: []problem.FieldError{{Field: "limit", Message: "m"}, {Field: "x", Message: "y"}}},
			status: 400, code: "validation_failed", detail: "The request has 2 invalid fields.",
			fields: []problem.FieldError{{Field: "limit", Message: "m"}, {Field: "x", Message: "y"}}},
		{name: "unauthorized", err: merchants.ErrUnauthorized, status: 401, code: "unauthorized",
			headers: map[string]string{"WWW-Authenticate": `Bearer realm="api"`}},
		{name: "not found", err: fmt.Errorf("get order ord_1: %w", payments.ErrNotFound), status: 404, code: "not_found"},
		{name: "no route", err: errNoRoute, status: 404, code: "not_found"},
		{name: "too large", err: fmt.Errorf("read body: %w", &http.MaxBytesError{Limit: 10}), status: 413,
			code: "request_too_large", detail: "The request body is larger than 10 bytes."},
		{name: "database down", err: fmt.Errorf("create order: %w", database.Classify(fmt.Errorf("%w: %s", database.ErrUnavailable, secret))),
			status: 503, code: "service_unavailable", headers: map[string]string{"Retry-After": "1"}},
		{name: "anything else", err: errors.New(secret), status: 500, code: "internal_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodPost, "/v1/orders", nil)
			var logs strings.Builder
			c.Set(loggerKey{}, &requestLogger{logger: slog.New(slog.NewTextHandler(&logs, nil))})

			RenderError(c, tt.err)

			require.True(t, c.IsAborted())
			require.Equal(t, tt.status, w.Code)
			require.Equal(t, problem.ContentType, w.Header().Get("Content-Type"))
			for k, v := range tt.headers {
				require.Equal(t, v, w.Header().Get(k), k)
			}
			body, _ := io.ReadAll(w.Body)
			require.NotContains(t, string(body), "secret_user", "an internal error's text never reaches the client")

			var p problem.Problem
			require.NoError(t, json.Unmarshal(body, &p))
			require.Equal(t, tt.status, p.Status)
			require.Equal(t, tt.code, p.Code)
			require.Equal(t, "https://errors.idempotent-payments.dev/"+tt.code, p.Type)
			require.NotEmpty(t, p.Title)
			require.NotEmpty(t, p.Detail)
			require.NotContains(t, p.Detail, "\n")
			if tt.detail != "" {
				require.Equal(t, tt.detail, p.Detail)
			}
			require.Equal(t, tt.fields, p.Errors)
			if tt.status == 500 {
				require.Contains(t, logs.String(), "secret_user", "but it is logged")
			}
		})
	}
}

// TestRetryAfterRoundsUp: Retry-After is whole seconds, rounded up, and at
// least one.
func TestRetryAfterRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", 300 * time.Millisecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", 30 * time.Second: "30"} {
		require.Equal(t, want, retryAfterSeconds(d), "%v", d)
	}
}
