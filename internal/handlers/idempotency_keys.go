package handlers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/idempotency"
)

// The key introspection route. A catch-all, because a key may hold any
// visible ASCII character, '/' included (percent-encode '/', '?', '#' and
// '%' in the URL).
const (
	idempotencyKeysPrefix = "/v1/idempotency-keys/"
	routeIdempotencyKey   = idempotencyKeysPrefix + "*key"
)

// KeyLookup reads the idempotency records (idempotency.Store's Get).
type KeyLookup interface {
	// Get returns the record of merchantID under key, live or, with
	// tombstones, expired. It returns idempotency.ErrNotFound (another
	// merchant's key included) or database.ErrUnavailable.
	Get(ctx context.Context, merchantID, key string, now time.Time) (*idempotency.Record, error)
}

// IdempotencyKeyResponse is what the API keeps under one of the merchant's
// Idempotency-Keys.
type IdempotencyKeyResponse struct {
	Object string `json:"object" enums:"idempotency_key" example:"idempotency_key"`
	// Key is the Idempotency-Key itself.
	Key string `json:"key" example:"3f1c2a9e-8d47-4b1f-9a53-0c6e2d7b8a41"`
	// State is executing from the first request until its final answer is
	// stored (a 202 keeps it executing until the outcome is known), then
	// completed: every repeat replays Response.
	State string `json:"state" enums:"executing,completed" example:"completed"`
	// RecoveryPoint is the last durable step of the operation; a retry of
	// an interrupted one resumes from it. "started" when nothing durable
	// happened yet.
	RecoveryPoint string `json:"recovery_point" example:"payment_created:pay_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	// Method and Path are those of the request that first used the key.
	Method string `json:"method" example:"POST"`
	Path   string `json:"path" example:"/v1/orders/ord_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D/payments"`
	// Fingerprint is the hash of the method, route, path parameters and
	// canonical body: a repeat with another fingerprint is 422.
	Fingerprint string `json:"fingerprint" example:"9b2d4c6f0e1a3b5d7f9e8c6a4b2d0f1e3c5a7b9d1f3e5c7a9b1d3f5e7c9a1b3d"`
	// LockedUntil is when a request working on an executing record loses
	// it: after that a retry may take it over and resume it. Null once
	// completed.
	LockedUntil *time.Time `json:"locked_until" extensions:"x-nullable" format:"date-time" example:"2025-06-01T12:00:30Z"`
	// CreatedAt is when the key was first used (RFC 3339, UTC).
	CreatedAt time.Time `json:"created_at" format:"date-time" example:"2025-06-01T12:00:00.123456Z"`
	// UpdatedAt is the last change: a recovery point, a takeover, the
	// stored answer.
	UpdatedAt time.Time `json:"updated_at" format:"date-time" example:"2025-06-01T12:00:00.456789Z"`
	// ExpiresAt is IDEMPOTENCY_TTL after the first use; from then on the
	// key is new again.
	ExpiresAt time.Time `json:"expires_at" format:"date-time" example:"2025-06-02T12:00:00.123456Z"`
	// Response is the stored answer that repeats replay; null until there
	// is one.
	Response *StoredResponse `json:"response" extensions:"x-nullable"`
}

// StoredResponse is a stored answer as a repeat replays it.
type StoredResponse struct {
	Status int `json:"status" example:"201"`
	// ContentType and Location are the headers a replay sends; Location
	// is null when the answer had none.
	ContentType string  `json:"content_type" example:"application/json"`
	Location    *string `json:"location" extensions:"x-nullable" example:"/v1/payments/pay_01JZ3K5V7Q8W9X0Y1Z2A3B4C5D"`
	// BodyEncoding says how Body is given: json, the body itself as a
	// JSON value (a JSON content type); base64, the body's bytes as a
	// base64 string (anything else, or an empty body).
	BodyEncoding string `json:"body_encoding" enums:"json,base64" example:"json"`
	// Body is the stored body, byte for byte what a replay sends when
	// body_encoding is base64; as a JSON value (the same value, perhaps
	// spaced differently) when it is json.
	Body json.RawMessage `json:"body" swaggertype:"object" extensions:"x-any"`
}

// keyHandlers serves the key introspection route.
type keyHandlers struct {
	keys KeyLookup
}

// getIdempotencyKey godoc
//
//	@Summary		Inspect an idempotency key
//	@Description	Returns what the API keeps under one of the merchant's own Idempotency-Keys: the state of the operation, its recovery point, the fingerprint of the request, and the stored answer that a repeat replays. Use it to learn what became of a request whose answer was lost. The key is validated like the header (400 idempotency_key_invalid); percent-encode '/', '?', '#' and '%'. Another merchant's key, an expired key or a key never used is 404 not_found.
//	@ID				getIdempotencyKey
//	@Tags			idempotency
//	@Security		BearerAuth
//	@Param			key	path	string	true	"The Idempotency-Key, percent-encoded: 1-255 visible ASCII characters (0x21-0x7E)"	minlength(1)	maxlength(255)	example(3f1c2a9e-8d47-4b1f-9a53-0c6e2d7b8a41)
//	@Produce		json
//	@Success		200	{object}	IdempotencyKeyResponse
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"idempotency_key_invalid, or malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		401	{object}	Problem401	"unauthorized: the API key is missing or unknown"
//	@Header			401	{string}	WWW-Authenticate	"The scheme to send the API key with: Bearer, realm api"
//	@Failure		404	{object}	Problem404	"not_found: no live record under this key for your account"
//	@Failure		500	{object}	Problem500	"internal_error: nothing was stored; the same request may be sent again"
//	@Failure		503	{object}	Problem503	"service_unavailable: the database cannot be reached; nothing was done"
//	@Failure		429	{object}	Problem429	"too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all with none of them idle (with Retry-After)"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			429,503	{integer}	Retry-After	"seconds to wait before retrying"
//	@Produce		json
//	@Router			/v1/idempotency-keys/{key} [get]
func (h *keyHandlers) getIdempotencyKey(c *gin.Context) (idempotency.Answer, error) {
	key := idempotencyKeyParam(c)
	if err := idempotency.ValidateKey(key); err != nil {
		return idempotency.Answer{}, err
	}
	rec, err := h.keys.Get(c.Request.Context(), MerchantID(c), key, time.Now())
	switch {
	case err != nil:
		return idempotency.Answer{}, err
	case rec.State == idempotency.StateExpired:
		return idempotency.Answer{}, idempotency.ErrNotFound // no live record
	}
	return answers.JSON(http.StatusOK, toIdempotencyKeyResponse(rec)), nil
}

// idempotencyKeyParam is the key of the introspection route: the
// catch-all's value without its leading slash.
func idempotencyKeyParam(c *gin.Context) string {
	return strings.TrimPrefix(c.Param("key"), "/")
}

func toIdempotencyKeyResponse(rec *idempotency.Record) IdempotencyKeyResponse {
	out := IdempotencyKeyResponse{
		Object:        "idempotency_key",
		Key:           rec.Key,
		State:         string(rec.State),
		RecoveryPoint: rec.Point,
		Method:        rec.Method,
		Path:          rec.Path,
		Fingerprint:   rec.Fingerprint,
		CreatedAt:     rec.CreatedAt.UTC(),
		UpdatedAt:     rec.UpdatedAt.UTC(),
		ExpiresAt:     rec.ExpiresAt.UTC(),
	}
	if rec.State == idempotency.StateExecuting {
		until := rec.LockedUntil.UTC()
		out.LockedUntil = &until
	}
	if rec.Answer != nil {
		out.Response = toStoredResponse(*rec.Answer)
	}
	return out
}

func toStoredResponse(r idempotency.Answer) *StoredResponse {
	out := &StoredResponse{Status: r.Status, ContentType: r.Header.Get("Content-Type")}
	if loc := r.Header.Get("Location"); loc != "" {
		out.Location = &loc
	}
	if isJSONContentType(out.ContentType) && json.Valid(r.Body) {
		out.BodyEncoding, out.Body = "json", json.RawMessage(r.Body)
	} else {
		out.BodyEncoding = "base64"
		out.Body, _ = json.Marshal(base64.StdEncoding.EncodeToString(r.Body))
	}
	return out
}

// isJSONContentType: application/json and any +json type
// (application/problem+json).
func isJSONContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
