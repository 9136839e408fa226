package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/idempotency/ginidem"
)

// Every handler returns its answer as a value, or an error that the error
// table (errors.go) turns into one; ginidem.Write is the one place that
// writes either. A keyed route's answer goes through the idempotency layer,
// which stores it when it is final; any other route's through Serve.

// contentTypeJSON is the Content-Type of every success body: plain
// application/json, as the contract and the OpenAPI document state, never
// gin's "; charset=utf-8" variant (reply, not c.JSON). One spelling
// everywhere, because the finisher stores the same value for an answer it
// builds outside any request, a replay must not depend on who stored it,
// and generated clients pick the decoder by the exact media type.
const contentTypeJSON = "application/json"

// reply is a success answer: v encoded as JSON under contentTypeJSON,
// final (stored under a key, on a keyed route) unless it is a 202, whose
// outcome is not known yet. header holds name and value pairs (Location,
// ETag).
func reply(status int, v any, header ...string) idempotency.Answer {
	h := make(http.Header, 1+len(header)/2)
	values := make([]string, 1, 1+len(header)/2) // one array for all
	values[0] = contentTypeJSON
	h["Content-Type"] = values[0:1:1]
	for i := 0; i+1 < len(header); i += 2 {
		values = append(values, header[i+1])
		h[http.CanonicalHeaderKey(header[i])] = values[len(values)-1 : len(values) : len(values)]
	}
	return idempotency.Answer{Status: status, Header: h, Body: encodeJSON(v), Final: status != http.StatusAccepted}
}

// encodeJSON encodes a response DTO. DTOs hold strings, integers and times
// of this era, which always encode; a failure is a programming error.
func encodeJSON(v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("handlers: encode %T: %v", v, err))
	}
	return body
}

// Serve is a route without an Idempotency-Key: h's answer, or its error's,
// written as it is.
func Serve(h ginidem.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		a, err := h(c)
		if err != nil {
			RenderError(c, err)
			return
		}
		ginidem.Write(c, a)
	}
}
