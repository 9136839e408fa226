// Package api holds the API's OpenAPI 3.1 document, swagger.json, generated
// from the handlers' swag annotations by `make swagger` (swag v2, then
// scripts/openapifix) and never edited by hand. The handlers serve it at
// /swagger/doc.json; the tests validate every answer against it.
package api

import _ "embed"

// OpenAPI is swagger.json as committed.
//
//go:embed swagger.json
var OpenAPI []byte
