package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/answers"
	"github.com/idemkeys/payments/internal/idempotency"
)

// Pinger is a dependency /readyz checks (*database.DB, a Redis client
// wrapped in PingerFunc).
type Pinger interface {
	// Ping returns nil when the dependency answers within ctx.
	Ping(ctx context.Context) error
}

// PingerFunc turns a function into a Pinger.
type PingerFunc func(ctx context.Context) error

// Ping calls f.
func (f PingerFunc) Ping(ctx context.Context) error { return f(ctx) }

// ReadyTimeout bounds the checks of one /readyz call, so that a hanging
// dependency makes the probe fail instead of hang.
const ReadyTimeout = 2 * time.Second

// Check states of ReadinessResponse.
const (
	checkUp   = "up"
	checkDown = "down"
	checkOff  = "off"

	breakerClosed = "closed"
	breakerOpen   = "open"
)

// HealthResponse is the body of /healthz.
type HealthResponse struct {
	Status string `json:"status" enums:"ok" example:"ok"`
}

// ReadinessResponse is the body of /readyz.
type ReadinessResponse struct {
	// Status is ok when every check is up (or off), degraded otherwise.
	Status string          `json:"status" enums:"ok,degraded" example:"ok"`
	Checks ReadinessChecks `json:"checks"`
}

// ReadinessChecks holds the state of each dependency.
type ReadinessChecks struct {
	Database string `json:"database" enums:"up,down" example:"up"`
	Redis    string `json:"redis" enums:"up,down,off" example:"off"`
	// Outbox names where the outbox dispatcher publishes (OUTBOX_SINK, or
	// the log when it is redis and Redis is off).
	Outbox string `json:"outbox" enums:"redis,nats,log" example:"log"`
	// NATS is the NATS server when the outbox publishes there, off
	// otherwise. Down is degraded: events wait in the database.
	NATS string `json:"nats" enums:"up,down,off" example:"off"`
	// ProviderBreaker is open when at least one of the provider client's
	// circuit breakers (one per merchant, one for lookups) is open or
	// half-open, closed otherwise. Open is degraded: that merchant's
	// provider calls fail fast with 502 while everyone else's go on.
	ProviderBreaker string `json:"provider_breaker" enums:"closed,open" example:"closed"`
}

// Outbox sinks as /readyz reports them.
const (
	OutboxRedis = "redis"
	OutboxNATS  = "nats"
	OutboxLog   = "log"
)

// healthHandlers serves the probes.
type healthHandlers struct {
	db     Pinger
	redis  Pinger // nil when the Redis layer is off
	outbox string // OutboxRedis, OutboxNATS or OutboxLog
	nats   Pinger // nil unless the outbox publishes to NATS
	// breakers counts the provider's open circuit breakers; nil: none.
	breakers func() int
}

// healthz godoc
//
//	@Summary		Liveness probe
//	@Description	Answers 200 while the process serves HTTP; it checks no dependency.
//	@ID				healthz
//	@Tags			health
//	@Produce		json
//	@Success		200	{object}	HealthResponse
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		429	{object}	Problem429	"too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all with none of them idle (with Retry-After)"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			429	{integer}	Retry-After	"seconds to wait before retrying"
//	@Produce		json
//	@Router			/healthz [get]
func (h *healthHandlers) healthz(*gin.Context) (idempotency.Answer, error) {
	return answers.JSON(http.StatusOK, HealthResponse{Status: "ok"}), nil
}

// readyz godoc
//
//	@Summary		Readiness probe
//	@Description	Checks the database and, when configured, Redis and the outbox's NATS server, and names the outbox's sink. Without the database nothing works: 503. Without Redis the API still works, slower: degraded, 200. Without NATS (OUTBOX_SINK=nats) the API works and events wait in the database until it is back: degraded, 200. A provider circuit breaker open (one merchant's calls kept failing; each merchant has its own) is degraded, 200: the others' payments go on.
//	@ID				readyz
//	@Tags			health
//	@Produce		json
//	@Success		200	{object}	ReadinessResponse
//	@Failure		503	{object}	ReadinessResponse	"the database is down"
//	@Produce		application/problem+json
//	@Failure		400	{object}	Problem400	"malformed_request: the request line or a header line is not valid HTTP/1.1; nothing was done"
//	@Failure		429	{object}	Problem429	"too_many_connections: over MAX_CONNS_PER_CLIENT connections from this address, or MAX_CONNS in all with none of them idle (with Retry-After)"
//	@Failure		431	{object}	Problem431	"request_header_too_large: the header block is over MAX_HEADER_BYTES; nothing was done"
//	@Failure		417	{object}	Problem417	"expectation_failed: an Expect header other than 100-continue; nothing was done"
//	@Failure		405	{object}	Problem405	"method_not_allowed: the path is not served with the request's method (never this operation's own); Allow lists those it is served with. Under /v1, only after a valid API key: without one, 401"
//	@Header			405	{string}	Allow	"The methods the path is served with, such as GET, POST"
//	@Failure		501	{object}	Problem501	"not_implemented: a Transfer-Encoding other than chunked; nothing was done"
//	@Failure		505	{object}	Problem505	"http_version_not_supported: not HTTP/1.0 or HTTP/1.1; nothing was done"
//	@Header			429	{integer}	Retry-After	"seconds to wait before retrying"
//	@Produce		json
//	@Router			/readyz [get]
func (h *healthHandlers) readyz(c *gin.Context) (idempotency.Answer, error) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), ReadyTimeout)
	defer cancel()

	resp := ReadinessResponse{Status: "ok", Checks: ReadinessChecks{Database: checkUp, Redis: checkOff, Outbox: h.outbox, NATS: checkOff, ProviderBreaker: breakerClosed}}
	status := http.StatusOK
	if err := h.db.Ping(ctx); err != nil {
		loggerFrom(c).WarnContext(ctx, "readiness: database down", "error", err)
		resp.Status, resp.Checks.Database, status = "degraded", checkDown, http.StatusServiceUnavailable
	}
	if h.redis != nil {
		resp.Checks.Redis = checkUp
		if err := h.redis.Ping(ctx); err != nil {
			loggerFrom(c).WarnContext(ctx, "readiness: redis down", "error", err)
			resp.Status, resp.Checks.Redis = "degraded", checkDown
		}
	}
	if h.nats != nil {
		resp.Checks.NATS = checkUp
		if err := h.nats.Ping(ctx); err != nil {
			loggerFrom(c).WarnContext(ctx, "readiness: nats down", "error", err)
			resp.Status, resp.Checks.NATS = "degraded", checkDown
		}
	}
	if h.breakers != nil && h.breakers() > 0 {
		// Not a dependency down: a merchant's provider calls failing. Its
		// state changes are logged by the client's wiring, not here.
		resp.Status, resp.Checks.ProviderBreaker = "degraded", breakerOpen
	}
	return answers.JSON(status, resp), nil
}
