package handlers

import (
	"github.com/gin-gonic/gin"
	swaggerFiles "github.com/swaggo/files"
	ginSwagger "github.com/swaggo/gin-swagger"

	// The spec generated from the swag annotations by `make swagger`. The
	// generated package registers it with swag when it is loaded, which is
	// how gin-swagger finds it: the one init side effect in the module, and
	// generated, not written.
	"github.com/idemkeys/payments/api"
)

// RegisterSwagger serves the Swagger UI at /swagger/index.html and the
// OpenAPI spec at /swagger/doc.json. Like /healthz it needs no API key: the
// spec describes the API, it holds no data. Call it on the engine NewRouter
// returns.
func RegisterSwagger(r gin.IRoutes) {
	r.GET("/swagger/*any", ginSwagger.WrapHandler(swaggerFiles.Handler,
		ginSwagger.InstanceName(api.SwaggerInfo.InstanceName()),
		// Keep the API key entered in the UI across reloads, and open
		// operations collapsed: the descriptions are long.
		ginSwagger.PersistAuthorization(true),
		ginSwagger.DocExpansion("list"),
	))
}
