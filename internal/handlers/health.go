package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
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
}

// healthHandlers serves the probes.
type healthHandlers struct {
	db    Pinger
	redis Pinger // nil when the Redis layer is off
}

// healthz godoc
//
//	@Summary		Liveness probe
//	@Description	Answers 200 while the process serves HTTP; it checks no dependency.
//	@Tags			health
//	@Produce		json
//	@Success		200	{object}	HealthResponse
//	@Router			/healthz [get]
func (h *healthHandlers) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, HealthResponse{Status: "ok"})
}

// readyz godoc
//
//	@Summary		Readiness probe
//	@Description	Checks the database and, when configured, Redis. Without the database nothing works: 503. Without Redis the API still works, slower: degraded, 200.
//	@Tags			health
//	@Produce		json
//	@Success		200	{object}	ReadinessResponse
//	@Failure		503	{object}	ReadinessResponse
//	@Router			/readyz [get]
func (h *healthHandlers) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), ReadyTimeout)
	defer cancel()

	resp := ReadinessResponse{Status: "ok", Checks: ReadinessChecks{Database: checkUp, Redis: checkOff}}
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
	c.JSON(status, resp)
}
