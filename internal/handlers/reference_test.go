package handlers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkeys/payments/internal/testkit"
)

// TestReferenceListsEveryError holds the errors table of
// docs/reference/api.md to the code: every problem code that
// internal/problem defines is on the page, with each status the error
// table (errors.go) answers it with, and the page lists no code or
// status pair the code does not produce.
func TestReferenceListsEveryError(t *testing.T) {
	documented := map[string]bool{} // "409 order_already_paid"
	for _, row := range testkit.MarkdownTable(t, "docs/reference/api.md", "Errors") {
		for code := range strings.SplitSeq(row[1], " / ") {
			documented[row[0]+" "+testkit.Unquote(code)] = true
		}
	}

	codes := problemCodes(t) // constant name -> slug
	answered := map[string]bool{}
	for _, call := range problemCalls(t, codes) {
		answered[call] = true
		if !documented[call] {
			t.Errorf("errors.go answers %s, missing from the reference", call)
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

// problemCalls finds every problem.New(http.StatusX, problem.CodeY, ...)
// in the handlers' error table and returns "status slug" pairs.
func problemCalls(t *testing.T, codes map[string]string) []string {
	t.Helper()
	statuses := map[string]int{}
	for code := 100; code < 600; code++ {
		if text := http.StatusText(code); text != "" {
			name := "Status" + strings.NewReplacer(" ", "", "-", "", "'", "").Replace(text)
			statuses[name] = code
		}
	}
	statuses["StatusRequestEntityTooLarge"] = http.StatusRequestEntityTooLarge
	var pairs []string
	ast.Inspect(parse(t, "internal/handlers/errors.go"), func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 2 || selector(call.Fun) != "problem.New" {
			return true
		}
		status, code := selector(call.Args[0]), selector(call.Args[1])
		s, ok := statuses[strings.TrimPrefix(status, "http.")]
		slug, known := codes[strings.TrimPrefix(code, "problem.")]
		if !ok || !known {
			t.Errorf("errors.go: problem.New(%s, %s): want an http.Status constant and a problem.Code constant", status, code)
			return true
		}
		pairs = append(pairs, strconv.Itoa(s)+" "+slug)
		return true
	})
	return pairs
}

func selector(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); ok {
		return x.Name + "." + sel.Sel.Name
	}
	return ""
}

func parse(t *testing.T, rel string) *ast.File {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), testkit.RepoFile(t, filepath.FromSlash(rel)), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
