package handlers_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	openapi "github.com/idemkeys/payments/api"
	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/problem"
)

// tableCodes is the error table, errors.go, by status.
func tableCodes(t *testing.T) map[int][]string {
	t.Helper()
	byStatus := map[int][]string{}
	for _, r := range handlers.ErrorTableForTest() {
		if !slices.Contains(byStatus[r.Status], r.Code) {
			byStatus[r.Status] = append(byStatus[r.Status], r.Code)
		}
	}
	require.NotEmpty(t, byStatus)
	return byStatus
}

type specDoc struct {
	Paths map[string]map[string]struct {
		RequestBody *struct {
			Content map[string]any
		} `json:"requestBody"`
		Responses map[string]struct {
			Content map[string]struct {
				Schema struct {
					Ref string `json:"$ref"`
				}
			}
		}
	}
	Components struct {
		Schemas map[string]struct {
			Properties map[string]struct {
				Enum     []any
				Example  any
				MaxItems *int `json:"maxItems"`
			}
			Required []string
		}
	}
}

func loadSpec(t *testing.T) specDoc {
	t.Helper()
	var doc specDoc
	require.NoError(t, json.Unmarshal(openapi.OpenAPI, &doc))
	return doc
}

// TestSpecProblemCodes: the code enum of each status's problem schemas
// (handlers.Problem409, or one per route such as handlers.Problem502Payment)
// is exactly the codes errors.go answers with that status, so that the
// document lists every code a client can get and none it cannot; and each
// status's example is its own.
func TestSpecProblemCodes(t *testing.T) {
	table := tableCodes(t)
	doc := loadSpec(t)
	documented := map[int]bool{}
	examples := map[string]int{}
	for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
		rest, ok := strings.CutPrefix(name, "handlers.Problem")
		if !ok || rest == "Field" {
			continue
		}
		status, err := strconv.Atoi(rest[:min(3, len(rest))])
		require.NoError(t, err, "%s: a problem schema is named by its status", name)
		want, ok := table[status]
		require.True(t, ok, "%s documents a status errors.go never answers", name)
		documented[status] = true
		schema := doc.Components.Schemas[name]
		var enum []string
		for _, v := range schema.Properties["code"].Enum {
			enum = append(enum, v.(string))
		}
		require.ElementsMatch(t, want, enum, "%s: the code enum must be the table's codes for %d", name, status)
		require.Equal(t, []any{float64(status)}, schema.Properties["status"].Enum, name)
		require.Equal(t, float64(status), schema.Properties["status"].Example, name)
		example := schema.Properties["code"].Example.(string)
		require.Contains(t, want, example, name)
		require.Equal(t, problem.TypeURI(example), schema.Properties["type"].Example, name)
		require.Subset(t, schema.Required, []string{"type", "title", "status", "detail", "code"}, name)
		if other, seen := examples[example]; seen && other != status {
			t.Errorf("statuses %d and %d share the example %s", other, status, example)
		}
		examples[example] = status
	}
	for status, codes := range table {
		require.True(t, documented[status], "errors.go answers %d (%v), but the document has no handlers.Problem%d", status, codes, status)
	}
	errs := doc.Components.Schemas["handlers.Problem400"].Properties["errors"].MaxItems
	require.NotNil(t, errs, "the schema bounds a problem's errors")
	require.Equal(t, handlers.MaxFieldErrors, *errs, "the schema's bound on errors is the server's")
}

// TestSpecProblemResponses: every error response of every operation is a
// problem of its own status, in application/problem+json only, and every
// success response is application/json only.
func TestSpecProblemResponses(t *testing.T) {
	doc := loadSpec(t)
	for _, path := range slices.Sorted(maps.Keys(doc.Paths)) {
		for method, op := range doc.Paths[path] {
			for status, resp := range op.Responses {
				where := method + " " + path + " " + status
				require.Len(t, resp.Content, 1, "%s: one content type per response", where)
				if path == "/readyz" {
					continue // its 503 is the readiness body, not a problem
				}
				if status >= "400" {
					require.Contains(t, resp.Content, problem.ContentType, where)
					require.True(t, strings.HasPrefix(resp.Content[problem.ContentType].Schema.Ref, "#/components/schemas/handlers.Problem"+status),
						"%s: the problem schema of its status, not %s", where, resp.Content[problem.ContentType].Schema.Ref)
				} else {
					require.Contains(t, resp.Content, "application/json", where)
				}
			}
		}
	}
}
