// Command openapifix is the one step of `make swagger` after swag: it
// rewrites the OpenAPI 3.1 document that swag v2 generated from the
// handlers' annotations (api/swagger.json) into what the API really does,
// where swag's annotations cannot say it. Each rule is one function of
// fix.go, named after what it states, and tested in fix_test.go:
//
//   - nullable: a member tagged extensions:"x-nullable" (swag has no other
//     way to say "sent as null") becomes a 3.1 type array with "null", or
//     anyOf its $ref and null;
//   - any value: a member tagged extensions:"x-any" holds any JSON value;
//   - request bodies: the schema of a request body loses the summary and
//     description swag copies into it from the @Param line (the request
//     body keeps its description);
//   - closed objects: every component object schema without
//     additionalProperties gets additionalProperties: false, because the
//     API sends no member that is not declared and refuses unknown request
//     members, and the validator of the tests must say so when one appears;
//   - public routes: an operation without security gets an explicit
//     security: [] (the /v1 routes name bearerauth);
//   - header rules: Idempotent-Replayed is the string "true" when sent;
//     Retry-After is whole seconds, always sent on 429 and 503; Location
//     and WWW-Authenticate, where declared, are always sent;
//   - key pattern: every Idempotency-Key header and the {key} path parameter
//     get idempotency.KeyPattern, the rule ValidateKey applies;
//   - request rules (requests.go): every rule the API enforces on a request
//     member or parameter, from the values its validators use (patterns,
//     enums, bounds), and those JSON Schema cannot state as the operation's
//     x-validation-rules; the provider event's data.object by event type;
//   - info: the license's SPDX identifier, and a check that the contact and
//     the external documentation are there;
//   - plain descriptions: a check that no description holds text Swagger UI
//     would read as HTML (<key> outside backquotes).
//
// Usage: go run ./scripts/openapifix api/swagger.json (rewrites it in place).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: openapifix <openapi.json>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "openapifix:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := Fix(in)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}
