package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idempotency"
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
	out, err := Fix([]byte(in))
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
		out, err := Fix([]byte(swagOutput))
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
		a, err := Fix([]byte(swagOutput))
		require.NoError(t, err)
		b, err := Fix(a)
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
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Fix([]byte(in))
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
