package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/idemkeys/payments/internal/idempotency"
)

// object is a JSON object of the document.
type object = map[string]any

// genericRules hold for any document swag writes from annotations like
// ours; projectRules state this API's own request rules and metadata, and
// need its schemas and operations.
var (
	genericRules = []func(object) error{nullable, anyValue, bodySchemas, closeObjects, publicRoutes, headerRules, keyPattern, plainDescriptions}
	projectRules = []func(object) error{webhookEvent, requestConstraints, info}
)

// Fix applies every rule to the document in and returns it encoded as swag
// writes it (indented by four spaces), with members in name order so that
// the output is deterministic.
func Fix(in []byte) ([]byte, error) {
	// The webhook's schemas come first, so that closeObjects sees them.
	return fix(in, append(slices.Clone(projectRules), genericRules...))
}

func fix(in []byte, rules []func(object) error) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber() // 1000000000000 stays 1000000000000, not 1e+12
	var doc object
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1") {
		return nil, fmt.Errorf("not an OpenAPI 3.1 document (openapi: %q); run swag with --v3.1", v)
	}
	delete(doc, "schemes") // a 2.0 member that swag v2 still writes, null
	if docs, _ := doc["externalDocs"].(object); docs["url"] == "" {
		delete(doc, "externalDocs") // written empty when no @externalDocs is given
	}
	for _, rule := range rules {
		if err := rule(doc); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// nullable rewrites every schema marked "x-nullable": true into the 3.1
// spelling: "type": ["string", "null"] for a plain type, or anyOf the $ref
// and {"type": "null"} (a $ref's siblings would otherwise be ignored by
// generators). An enum gains null too.
func nullable(doc object) error {
	var err error
	walk(doc, func(s object) {
		if s["x-nullable"] != true || err != nil {
			return
		}
		delete(s, "x-nullable")
		switch t := s["type"].(type) {
		case string:
			s["type"] = []any{t, "null"}
			if enum, ok := s["enum"].([]any); ok {
				s["enum"] = append(enum, nil)
			}
		case nil:
			ref, ok := s["$ref"].(string)
			if !ok {
				err = fmt.Errorf("x-nullable on a schema with neither type nor $ref: %v", s)
				return
			}
			delete(s, "$ref")
			s["anyOf"] = []any{object{"$ref": ref}, object{"type": "null"}}
		default:
			err = fmt.Errorf("x-nullable on a schema whose type is %v", t)
		}
	})
	return err
}

// anyValue turns a schema marked "x-any": true (a member that holds any
// JSON value, such as a stored body) into the empty schema, which swag has
// no tag for.
func anyValue(doc object) error {
	walk(doc, func(s object) {
		if s["x-any"] == true {
			delete(s, "x-any")
			delete(s, "type")
		}
	})
	return nil
}

// bodySchemas drops the "summary" swag copies from a @Param body line into
// the request body's schema, where it is no JSON Schema keyword (the
// request body keeps the description).
func bodySchemas(doc object) error {
	forEachOperation(doc, func(_, _ string, op object) {
		content, _ := dig(op, "requestBody", "content").(object)
		for _, mt := range content {
			if schema, _ := dig(mt, "schema").(object); schema != nil {
				delete(schema, "summary")
				delete(schema, "description")
			}
		}
	})
	return nil
}

// closeObjects gives every component object schema that lists properties
// and says nothing of others additionalProperties: false. Maps (metadata)
// and free-form objects (a stored body) declare additionalProperties or no
// properties, and stay open, and so do the provider's events (openSchemas).
func closeObjects(doc object) error {
	schemas, _ := dig(doc, "components", "schemas").(object)
	for _, name := range sortedKeys(schemas) {
		s, _ := schemas[name].(object)
		if _, has := s["properties"]; !has || openSchemas[name] {
			continue
		}
		if _, has := s["additionalProperties"]; !has {
			s["additionalProperties"] = false
		}
	}
	return nil
}

// publicRoutes gives every operation without a security requirement an
// explicit empty one: public by decision, not by omission.
func publicRoutes(doc object) error {
	forEachOperation(doc, func(_, _ string, op object) {
		if _, has := op["security"]; !has {
			op["security"] = []any{}
		}
	})
	return nil
}

// headerRules states what the annotations' @Header lines cannot: a value
// set, a minimum, whether the header is always sent.
func headerRules(doc object) error {
	var err error
	forEachOperation(doc, func(path, method string, op object) {
		responses, _ := op["responses"].(object)
		for _, status := range sortedKeys(responses) {
			resp, _ := responses[status].(object)
			headers, _ := resp["headers"].(object)
			for _, name := range sortedKeys(headers) {
				h, _ := headers[name].(object)
				schema, _ := h["schema"].(object)
				switch name {
				case "Idempotent-Replayed":
					// Only on a replay, and then "true".
					schema["enum"] = []any{"true"}
				case "Retry-After":
					// Whole seconds, at least 1; always sent with a 429 or a
					// 503 problem, and with a 409 only when the conflict is
					// one that ends by itself (the problem's code says).
					if schema["type"] != "integer" {
						err = fmt.Errorf("%s %s %s: Retry-After must be {integer}", method, path, status)
					}
					schema["minimum"] = json.Number("1")
					if status == "429" || status == "503" {
						h["required"] = true
					}
				case "Allow", "Location", "WWW-Authenticate":
					// Declared only where they are always sent.
					h["required"] = true
				}
			}
		}
	})
	return err
}

// keyPattern puts ValidateKey's rule on every Idempotency-Key header and on
// the {key} parameter of the key introspection route.
func keyPattern(doc object) error {
	found := 0
	forEachOperation(doc, func(path, _ string, op object) {
		params, _ := op["parameters"].([]any)
		for _, p := range params {
			param, _ := p.(object)
			name, in := param["name"], param["in"]
			if (name == idempotency.HeaderKey && in == "header") ||
				(name == "key" && in == "path" && strings.HasPrefix(path, "/v1/idempotency-keys/")) {
				schema, _ := param["schema"].(object)
				if schema == nil {
					schema = object{"type": "string"}
					param["schema"] = schema
				}
				schema["pattern"] = idempotency.KeyPattern
				schema["minLength"] = json.Number("1")
				schema["maxLength"] = json.Number(fmt.Sprint(idempotency.MaxKeyLength))
				found++
			}
		}
	})
	if found == 0 {
		return errors.New("no Idempotency-Key parameter found")
	}
	return nil
}

// walk calls f on every object of v, depth first, children before parents
// are not assumed: f may change the object it is given.
func walk(v any, f func(object)) {
	switch v := v.(type) {
	case object:
		f(v)
		for _, k := range sortedKeys(v) {
			walk(v[k], f)
		}
	case []any:
		for _, e := range v {
			walk(e, f)
		}
	}
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func forEachOperation(doc object, f func(path, method string, op object)) {
	paths, _ := doc["paths"].(object)
	for _, path := range sortedKeys(paths) {
		item, _ := paths[path].(object)
		for _, m := range methods {
			if op, ok := item[m].(object); ok {
				f(path, m, op)
			}
		}
	}
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		o, ok := v.(object)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}

func sortedKeys(o object) []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
