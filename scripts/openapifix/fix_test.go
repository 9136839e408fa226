package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
	"github.com/idemkeys/payments/internal/payments"
)

// swagOutput is a small document shaped like swag v2's output, with one
// case of each rule.
const swagOutput = `{
  "openapi": "3.1.0",
  "schemes": null,
  "externalDocs": {"description": "", "url": ""},
  "components": {"schemas": {
    "handlers.Thing": {"type": "object", "properties": {
      "note": {"type": "string", "x-nullable": true},
      "kind": {"type": "string", "enum": ["a", "b"], "x-nullable": true},
      "child": {"$ref": "#/components/schemas/handlers.Child", "description": "d", "x-nullable": true},
      "body": {"type": "object", "x-any": true},
      "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
      "big": {"type": "integer", "maximum": 1000000000000}
    }},
    "handlers.Child": {"type": "object", "properties": {"a": {"type": "string"}}},
    "handlers.Open": {"type": "object"}
  }},
  "paths": {
    "/v1/things": {"post": {
      "security": [{"BearerAuth": []}],
      "parameters": [{"in": "header", "name": "Idempotency-Key", "required": true, "schema": {"type": "string"}}],
      "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/handlers.Thing", "summary": "thing", "description": "The thing"}}}},
      "responses": {
        "201": {"description": "Created", "headers": {
          "Location": {"schema": {"type": "string"}},
          "Idempotent-Replayed": {"schema": {"type": "string"}}
        }},
        "409": {"description": "x", "headers": {"Retry-After": {"schema": {"type": "integer"}}}},
        "429": {"description": "x", "headers": {"Retry-After": {"schema": {"type": "integer"}}}}
      }
    }},
    "/v1/idempotency-keys/{key}": {"get": {
      "parameters": [{"in": "path", "name": "key", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "OK"}}
    }}
  }
}`

func fixed(t *testing.T, in string) map[string]any {
	t.Helper()
	out, err := fix([]byte(in), genericRules)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out, &doc))
	return doc
}

func TestFix(t *testing.T) {
	doc := fixed(t, swagOutput)
	thing := dig(doc, "components", "schemas", "handlers.Thing").(object)
	props := thing["properties"].(object)
	post := dig(doc, "paths", "/v1/things", "post").(object)
	get := dig(doc, "paths", "/v1/idempotency-keys/{key}", "get").(object)

	t.Run("2.0 leftovers and empty members go", func(t *testing.T) {
		require.NotContains(t, doc, "schemes")
		require.NotContains(t, doc, "externalDocs")
	})
	t.Run("nullable", func(t *testing.T) {
		require.Equal(t, object{"type": []any{"string", "null"}}, props["note"])
		require.Equal(t, object{"type": []any{"string", "null"}, "enum": []any{"a", "b", nil}}, props["kind"])
		require.Equal(t, object{"description": "d", "anyOf": []any{
			object{"$ref": "#/components/schemas/handlers.Child"}, object{"type": "null"},
		}}, props["child"])
	})
	t.Run("any value", func(t *testing.T) {
		require.Equal(t, object{}, props["body"])
	})
	t.Run("numbers keep their spelling", func(t *testing.T) {
		out, err := fix([]byte(swagOutput), genericRules)
		require.NoError(t, err)
		require.Contains(t, string(out), `"maximum": 1000000000000`)
	})
	t.Run("request body schemas", func(t *testing.T) {
		schema := dig(post, "requestBody", "content", "application/json", "schema")
		require.Equal(t, object{"$ref": "#/components/schemas/handlers.Thing"}, schema)
	})
	t.Run("closed objects", func(t *testing.T) {
		require.Equal(t, false, thing["additionalProperties"])
		require.Equal(t, false, dig(doc, "components", "schemas", "handlers.Child", "additionalProperties"))
		require.NotContains(t, dig(doc, "components", "schemas", "handlers.Open"), "additionalProperties", "a free-form object stays open")
		require.Equal(t, object{"type": "string"}, props["metadata"].(object)["additionalProperties"], "a map keeps its value schema")
	})
	t.Run("public routes", func(t *testing.T) {
		require.Equal(t, []any{}, get["security"])
		require.Equal(t, []any{object{"BearerAuth": []any{}}}, post["security"])
	})
	t.Run("header rules", func(t *testing.T) {
		headers := func(status string) object { return dig(post, "responses", status, "headers").(object) }
		require.Equal(t, true, headers("201")["Location"].(object)["required"])
		require.Equal(t, []any{"true"}, dig(headers("201"), "Idempotent-Replayed", "schema", "enum"))
		require.NotContains(t, headers("201")["Idempotent-Replayed"], "required", "only replays carry it")
		require.NotContains(t, headers("409")["Retry-After"], "required", "only some conflicts carry it")
		require.Equal(t, true, headers("429")["Retry-After"].(object)["required"])
		require.Equal(t, 1.0, dig(headers("429"), "Retry-After", "schema", "minimum"))
	})
	t.Run("key pattern", func(t *testing.T) {
		for _, op := range []object{post, get} {
			schema := op["parameters"].([]any)[0].(object)["schema"].(object)
			require.Equal(t, idempotency.KeyPattern, schema["pattern"])
			require.Equal(t, 1.0, schema["minLength"])
			require.Equal(t, 255.0, schema["maxLength"])
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		a, err := fix([]byte(swagOutput), genericRules)
		require.NoError(t, err)
		b, err := fix(a, genericRules)
		require.NoError(t, err)
		require.Equal(t, string(a), string(b), "fixing a fixed document changes nothing")
	})
}

func TestFixRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"a 2.0 document":                  `{"swagger": "2.0"}`,
		"nullable without type or $ref":   `{"openapi": "3.1.0", "components": {"schemas": {"A": {"x-nullable": true}}}}`,
		"a Retry-After that is no number": `{"openapi": "3.1.0", "paths": {"/a": {"get": {"parameters": [{"in": "header", "name": "Idempotency-Key"}], "responses": {"503": {"headers": {"Retry-After": {"schema": {"type": "string"}}}}}}}}}`,
		"no Idempotency-Key at all":       `{"openapi": "3.1.0", "paths": {}}`,
		"text Swagger UI reads as HTML":   `{"openapi": "3.1.0", "paths": {"/a": {"get": {"description": "sent as Bearer <key>", "parameters": [{"in": "header", "name": "Idempotency-Key"}]}}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fix([]byte(in), genericRules)
			require.Error(t, err)
		})
	}
}

// TestCommittedDocumentIsFixed: api/swagger.json is a fixed point, so
// nothing was edited by hand after the step, and the step ran.
func TestCommittedDocumentIsFixed(t *testing.T) {
	committed, err := os.ReadFile("../../api/swagger.json")
	require.NoError(t, err)
	again, err := Fix(committed)
	require.NoError(t, err)
	require.Equal(t, string(committed), string(again))
}

// committedDoc is api/swagger.json as committed, decoded.
func committedDoc(t *testing.T) object {
	t.Helper()
	raw, err := os.ReadFile("../../api/swagger.json")
	require.NoError(t, err)
	var doc object
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&doc))
	return doc
}

// TestRequestRules: the document carries the API's own rule values (not
// copies), a struct tag that disagrees with a rule stops the step, and what
// only the description can say is listed for fuzzers.
func TestRequestRules(t *testing.T) {
	doc := committedDoc(t)
	schemas := dig(doc, "components", "schemas").(object)
	prop := func(schema, member string) object { return dig(schemas, schema, "properties", member).(object) }

	require.Equal(t, payments.PatternEmail, prop("handlers.CreateCustomerRequest", "email")["pattern"])
	require.Equal(t, payments.PatternPaymentMethod, prop("handlers.PayOrderRequest", "payment_method")["pattern"])
	require.Equal(t, payments.PatternText, prop("handlers.OrderItem", "sku")["pattern"])
	require.Equal(t, enum(payments.Currencies()), prop("handlers.CreateOrderRequest", "currency")["enum"])
	require.Contains(t, prop("handlers.CreateOrderRequest", "currency")["enum"], "SEK")
	require.Equal(t, enum(payments.Countries()), prop("handlers.ShippingAddress", "country")["enum"])
	require.Equal(t, json.Number(fmt.Sprint(int64(payments.MaxRefundAmount))), prop("handlers.RefundPaymentRequest", "amount")["maximum"])
	metadata := prop("handlers.CreateOrderRequest", "metadata")
	require.Equal(t, payments.PatternText, dig(metadata, "propertyNames", "pattern"))
	require.Equal(t, payments.PatternText, dig(metadata, "additionalProperties", "pattern"))

	listOrders := dig(doc, "paths", "/v1/orders", "get").(object)
	var startingAfter object
	for _, p := range listOrders["parameters"].([]any) {
		if p.(object)["name"] == "starting_after" {
			startingAfter = p.(object)
		}
	}
	require.Equal(t, payments.PatternVisibleASCII, dig(startingAfter, "schema", "pattern"))
	require.Equal(t, "starting_after", dig(listOrders, "x-validation-rules").([]any)[0].(object)["field"])

	for _, name := range []string{"handlers.ProviderEventRequest", "handlers.ProviderCharge", "handlers.ProviderRefund"} {
		require.NotContains(t, schemas[name], "additionalProperties", "%s is open: the provider may add members", name)
	}
	require.Equal(t, false, dig(schemas, "handlers.CreateOrderRequest", "additionalProperties"))

	require.Equal(t, "MIT", dig(doc, "info", "license", "identifier"))
	require.NotEmpty(t, dig(doc, "externalDocs", "url"))

	t.Run("a tag that disagrees with the rule stops the step", func(t *testing.T) {
		raw, err := os.ReadFile("../../api/swagger.json")
		require.NoError(t, err)
		wrong := bytes.Replace(raw, []byte(`"maximum": 10000,`), []byte(`"maximum": 9999,`), 1)
		require.NotEqual(t, raw, wrong)
		_, err = Fix(wrong)
		require.ErrorContains(t, err, "maximum")
	})
}

// TestReplayedDeclaredEverywhere: Idempotent-Replayed is declared on every
// status a keyed operation may replay: each 2xx but 202, and the 402 and 409
// of the operations whose stored answers include them (swag drops a @Header
// line for a status whose @Failure comes after it, hence this test).
func TestReplayedDeclaredEverywhere(t *testing.T) {
	replayable := map[string][]string{
		"createOrder":    {"201"},
		"createCustomer": {"201", "409"},
		"addOrderItem":   {"201", "409"},
		"payOrder":       {"201", "402", "409"},
		"refundPayment":  {"201", "409"},
	}
	doc := committedDoc(t)
	found := map[string][]string{}
	forEachOperation(doc, func(path, method string, op object) {
		keyed := false
		params, _ := op["parameters"].([]any)
		for _, p := range params {
			keyed = keyed || p.(object)["name"] == "Idempotency-Key"
		}
		if !keyed {
			return
		}
		id := op["operationId"].(string)
		responses := op["responses"].(object)
		for _, status := range sortedKeys(responses) {
			if _, ok := dig(responses, status, "headers", "Idempotent-Replayed").(object); ok {
				found[id] = append(found[id], status)
			}
		}
		require.Contains(t, replayable, id, "a keyed operation this test does not know: say what it replays")
	})
	require.Equal(t, replayable, found)
}
