package app_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// documentedRoute is a route in a code span, such as `GET /v1/orders/{id}`.
var documentedRoute = regexp.MustCompile("(GET|POST|PUT|PATCH|DELETE) (/[^` ,]*)")

// TestReferenceListsEveryRoute holds the routes table of
// docs/reference/api.md to the program's router: every route the API
// serves is on the page, and the page lists none it does not serve.
func TestReferenceListsEveryRoute(t *testing.T) {
	api := apptest.Start(t, testkit.DatabaseURL(t, database.SQLite))
	engine, ok := api.Handler.(*gin.Engine)
	if !ok {
		t.Fatalf("the program's handler is a %T, not the gin engine", api.Handler)
	}
	var served []string // "GET /v1/orders/{id}", a catch-all as "GET /swagger/*"
	for _, r := range engine.Routes() {
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			switch {
			case strings.HasPrefix(p, ":"):
				parts[i] = "{" + p[1:] + "}"
			case strings.HasPrefix(p, "*"):
				parts[i] = "*"
			}
		}
		served = append(served, r.Method+" "+strings.Join(parts, "/"))
	}
	matches := func(route, doc string) bool {
		if prefix, ok := strings.CutSuffix(route, "*"); ok {
			return strings.HasPrefix(doc, prefix)
		}
		return route == doc
	}

	var documented []string
	for _, row := range testkit.MarkdownTable(t, "docs/reference/api.md", "Routes") {
		for _, m := range documentedRoute.FindAllStringSubmatch(row[0], -1) {
			path, _, _ := strings.Cut(m[2], "?") // a query shown in the reference is not part of the route
			documented = append(documented, m[1]+" "+path)
		}
	}
	for _, route := range served {
		if !slices.ContainsFunc(documented, func(doc string) bool { return matches(route, doc) }) {
			t.Errorf("the API serves %s, missing from the reference", route)
		}
	}
	for _, doc := range documented {
		if !slices.ContainsFunc(served, func(route string) bool { return matches(route, doc) }) {
			t.Errorf("the reference lists %s, which the API does not serve", doc)
		}
	}
}
