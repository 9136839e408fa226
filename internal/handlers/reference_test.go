package handlers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkeys/payments/internal/handlers"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestReferenceListsEveryError holds the errors table of
// docs/reference/api.md to the code: every problem code that
// internal/problem defines is on the page, with each status the error
// table (errors.go) answers it with and whether that answer is stored, and
// the page lists no code, status or storing the table does not have.
func TestReferenceListsEveryError(t *testing.T) {
	documented := map[string]string{} // "409 order_already_paid" -> "yes"
	for _, row := range testkit.MarkdownTable(t, "docs/reference/api.md", "Errors") {
		for code := range strings.SplitSeq(row[1], " / ") {
			documented[row[0]+" "+testkit.Unquote(code)] = row[2]
		}
	}

	codes := problemCodes(t) // constant name -> slug
	answered := map[string]bool{}
	for _, r := range handlers.ErrorTableForTest() {
		pair := strconv.Itoa(r.Status) + " " + r.Code
		answered[pair] = true
		stored, ok := documented[pair]
		switch {
		case !ok:
			t.Errorf("the error table answers %s, missing from the reference", pair)
		case stored != map[bool]string{true: "yes", false: "no"}[r.Kept]:
			t.Errorf("the reference says stored %q for %s; the error table's kept column says %v", stored, pair, r.Kept)
		}
	}
	for pair := range documented {
		if !answered[pair] {
			t.Errorf("the reference lists %s, which the error table never answers", pair)
		}
	}
	for name, slug := range codes {
		found := false
		for pair := range answered {
			found = found || strings.HasSuffix(pair, " "+slug)
		}
		if !found {
			t.Errorf("problem.%s (%s) is defined but the error table never answers it", name, slug)
		}
	}
}

// problemCodes reads the Code* constants of internal/problem.
func problemCodes(t *testing.T) map[string]string {
	t.Helper()
	f := parse(t, "internal/problem/problem.go")
	codes := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if !strings.HasPrefix(name.Name, "Code") || i >= len(spec.Values) {
				continue
			}
			if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				codes[name.Name], _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})
	if len(codes) == 0 {
		t.Fatal("no Code constants in internal/problem")
	}
	return codes
}

func parse(t *testing.T, rel string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), testkit.RepoFile(t, filepath.FromSlash(rel)), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
