package handlers

import (
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// errUnsupportedMediaType refuses a request body that is not declared as
// JSON: the error table answers it 415 unsupported_media_type.
var errUnsupportedMediaType = errors.New("the request body is not declared as application/json")

// requireJSON refuses, with 415, a request that carries a body whose
// Content-Type is missing or is not application/json. It runs before the
// idempotency middleware (and before the webhook's signature check), so
// that a body the API will not read never reserves a key, and the 415 is
// never stored: the same key may be sent again with the right type.
//
// What it accepts is exactly what the OpenAPI document declares:
// application/json, with no parameter but charset=utf-8 (in any case), the
// one encoding JSON may have (RFC 8259). It refuses:
//
//   - a body without a Content-Type: the client did not say what it sent,
//     and guessing JSON would accept a form or a file by accident;
//   - other types, forms and text/plain included, even when their bytes
//     happen to be JSON: the client meant something else, or a browser form
//     on another site is posting to the API;
//   - the +json types (application/merge-patch+json and the like): they
//     promise semantics (a merge patch is not an order) that the API does
//     not implement, so accepting them would be a silent misreading.
//
// A request without a body (Content-Length 0, or none) needs no type: a
// refund of all that is left is a POST with no body at all.
func requireJSON() gin.HandlerFunc {
	return func(c *gin.Context) {
		if hasBody(c.Request) && !isRequestJSON(c.Request.Header.Values("Content-Type")) {
			RenderError(c, errUnsupportedMediaType)
		}
	}
}

// requireJSONBodies is requireJSON for the methods that carry a request
// body (POST, PUT, PATCH), for a group whose other routes are reads.
func requireJSONBodies() gin.HandlerFunc {
	check := requireJSON()
	return func(c *gin.Context) {
		switch c.Request.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			check(c)
		}
	}
}

// hasBody reports whether the request carries a body: a Content-Length
// above zero, or a body of unknown length (chunked), which may turn out
// empty but must then still say what it is.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// isRequestJSON reports whether values, the request's Content-Type header
// lines, declare application/json, alone or with charset=utf-8. Two
// Content-Type lines are refused: which one counts would depend on who
// reads the request.
func isRequestJSON(values []string) bool {
	if len(values) != 1 {
		return false
	}
	if values[0] == "application/json" {
		// What nearly every client sends: no need to parse it.
		return true
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil || mt != "application/json" {
		return false
	}
	for name, value := range params {
		if name != "charset" || !strings.EqualFold(value, "utf-8") {
			return false
		}
	}
	return true
}
