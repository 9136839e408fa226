package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCallsListsCrossFileStepsAndEntries: in a small module of this
// module's path, Start (a.go) calls helper (helper.go), b.Twice (another
// package) and T.Do through an interface; T.Do calls b.Twice in its own
// file; Unused never ran. The steps are the three calls from a.go, each to
// a function that ran, and Start's entry from outside; the call within
// b.go and the function that did not run are not steps. By package, the
// two calls into b cross (one pair, a to b), the call of helper does not,
// and the entry reaches a.
func TestCallsListsCrossFileStepsAndEntries(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":          "module github.com/idemkeys/payments\n\ngo 1.26\n",
		"cmd/app/main.go": "package main\n\nfunc main() {}\n",
		"internal/a/a.go": `package a

import "github.com/idemkeys/payments/internal/b"

type Doer interface{ Do() int }

func Start(d Doer) int { return helper() + b.Twice(2) + d.Do() }
`,
		"internal/a/helper.go": `package a

func helper() int { return 1 }
`,
		"internal/b/b.go": `package b

func Twice(n int) int { return 2 * n }

type T struct{}

func (T) Do() int { return Twice(3) }

func Unused() int { return 0 }
`,
	}
	for name, text := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	line := func(n int) span { return span{pos{n, 1}, pos{n, 200}} }
	ran := map[string][]span{
		"internal/a/a.go":      {line(7)},
		"internal/a/helper.go": {line(3)},
		"internal/b/b.go":      {line(3), line(7)},
	}
	var out strings.Builder
	if err := calls(&out, ran, nil); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	t.Log(got)
	for _, want := range []string{
		"4 steps: 3 cross-file calls and 1 entries from outside, between 4 functions in 3 files\n",
		"by package: 2 of the calls go into another package, over 1 pairs of packages; the entries reach 1 packages\n",
		"-> internal/a/a.go Start\n",
		"internal/a/a.go Start",
		"-> internal/a/helper.go helper\n",
		"-> internal/b/b.go Twice\n",
		"-> internal/b/b.go T.Do\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the listing lacks %q", want)
		}
	}
	if strings.Contains(got, "Unused") || strings.Contains(got, "internal/b/b.go T.Do  ") {
		t.Errorf("a function that did not run, or a call within its file, is listed")
	}
}
