package handlers

import (
	_ "embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	swaggerFiles "github.com/swaggo/files/v2"

	"github.com/idemkeys/payments/api"
	"github.com/idemkeys/payments/internal/answers"
)

// idempotencyKeyPlugin fills a fresh Idempotency-Key on Try it out and
// keeps it until the reader asks for a new one (swagger/idempotency-key.js).
//
//go:embed swagger/idempotency-key.js
var idempotencyKeyPlugin string

// swaggerInitializer starts Swagger UI on the spec beside it. It replaces
// the bundle's own swagger-initializer.js, which points at a demo spec.
// The key entered in Authorize survives reloads; operations open collapsed,
// as the descriptions are long.
var swaggerInitializer = idempotencyKeyPlugin + `
window.onload = function () {
  window.ui = SwaggerUIBundle({
    url: "doc.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    persistAuthorization: true,
    docExpansion: "list",
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl, IdempotencyKeyPlugin],
    layout: "StandaloneLayout"
  });
};
`

// RegisterSwagger serves Swagger UI 5 at /swagger/index.html and the OpenAPI
// 3.1 document (api/swagger.json, as committed) at /swagger/doc.json. Like
// /healthz it needs no API key: the spec describes the API, it holds no
// data. Call it on the engine NewRouter returns.
func RegisterSwagger(r gin.IRoutes) {
	assets := http.StripPrefix("/swagger", http.FileServerFS(swaggerFiles.FS))
	r.GET("/swagger/*any", func(c *gin.Context) {
		switch name := strings.TrimPrefix(c.Param("any"), "/"); name {
		case "doc.json":
			c.Data(http.StatusOK, answers.ContentTypeJSON, api.OpenAPI)
		case "swagger-initializer.js":
			c.Data(http.StatusOK, "text/javascript; charset=utf-8", []byte(swaggerInitializer))
		case "", "index.html":
			page, err := fs.ReadFile(swaggerFiles.FS, "index.html")
			if err != nil {
				RenderError(c, err)
				return
			}
			c.Data(http.StatusOK, "text/html; charset=utf-8", page)
		default:
			assets.ServeHTTP(c.Writer, c.Request)
		}
	})
}
