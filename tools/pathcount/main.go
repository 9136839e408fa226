// Command pathcount lists the code one request ran, from a coverage
// profile of that request alone (internal/app's TestPathOfOneRequest,
// through make path): the functions, grouped by file and package, and
// their totals. It is how docs/design/operation.md counts a path, instead
// of by hand.
//
//	pathcount [-calls] [-skip regexp] [-base before.txt] profile.txt
//
// The profiles are the text format (go tool covdata textfmt). With -base,
// a block counts only if it ran more often in profile.txt than in
// before.txt: a process profiled twice, once without the request and once
// with it, leaves the request's own code. A function counts when any
// statement of its body did; a closure counts as part of the function it
// is written in. Files whose path matches -skip (the test
// kit, the mock provider's server: the outside service) are left out.
// With -calls it lists the request's steps instead, as calls.go defines
// them: the calls from one file to another, caller and callee.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

const module = "github.com/idemkeys/payments/"

func main() {
	skip := flag.String("skip", "", "leave out files whose path matches this regexp")
	base := flag.String("base", "", "a profile of the same process without the request, to subtract")
	listCalls := flag.Bool("calls", false, "list the request's steps (its cross-file calls) instead of its functions; run from the module's root")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: pathcount [-skip regexp] [-base before.txt] profile.txt")
		os.Exit(2)
	}
	var skipRE *regexp.Regexp
	if *skip != "" {
		var err error
		if skipRE, err = regexp.Compile(*skip); err != nil {
			fmt.Fprintln(os.Stderr, "pathcount: -skip:", err)
			os.Exit(2)
		}
	}
	before := map[block]int64{}
	if *base != "" {
		var err error
		if before, err = readProfile(*base); err != nil {
			fmt.Fprintln(os.Stderr, "pathcount:", err)
			os.Exit(1)
		}
	}
	after, err := readProfile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "pathcount:", err)
		os.Exit(1)
	}
	ran := map[string][]span{}
	for b, n := range after {
		if n > before[b] {
			ran[b.file] = append(ran[b.file], b.span)
		}
	}
	if *listCalls {
		err = calls(os.Stdout, ran, skipRE)
	} else {
		err = report(os.Stdout, ran, skipRE)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pathcount:", err)
		os.Exit(1)
	}
}

// block is a block of a profile: a file of the module, and where in it.
type block struct {
	file string
	span span
}

// pos is a position in a file: its line and column.
type pos struct{ line, col int }

func (p pos) before(q pos) bool { return p.line < q.line || p.line == q.line && p.col < q.col }

// span is where a block lies in its file, from its first position to its
// last.
type span struct{ from, to pos }

// parseSpan reads a profile's "12.3,15.4".
func parseSpan(s string) (span, error) {
	ends := strings.Split(s, ",")
	if len(ends) != 2 {
		return span{}, fmt.Errorf("not a span: %q", s)
	}
	var p [2]pos
	for i, e := range ends {
		lc := strings.Split(e, ".")
		if len(lc) != 2 {
			return span{}, fmt.Errorf("not a span: %q", s)
		}
		l, err1 := strconv.Atoi(lc[0])
		c, err2 := strconv.Atoi(lc[1])
		if err1 != nil || err2 != nil {
			return span{}, fmt.Errorf("not a span: %q", s)
		}
		p[i] = pos{l, c}
	}
	return span{p[0], p[1]}, nil
}

// ranIn reports whether a block that ran lies in body.
func ranIn(spans []span, fset *token.FileSet, body *ast.BlockStmt) bool {
	from, to := fset.Position(body.Lbrace), fset.Position(body.Rbrace)
	for _, s := range spans {
		if s.from.line >= from.Line && s.to.line <= to.Line {
			return true
		}
	}
	return false
}

// readProfile reads a text coverage profile: how often each block of the
// module's files ran.
func readProfile(name string) (map[block]int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[block]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") || line == "" {
			continue
		}
		// github.com/…/file.go:12.3,15.4 2 1
		colon := strings.LastIndex(line, ":")
		if colon < 0 {
			return nil, fmt.Errorf("%s: not a coverage line: %q", name, line)
		}
		fields := strings.Fields(line[colon+1:])
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s: not a coverage line: %q", name, line)
		}
		if !strings.HasPrefix(line, module) {
			continue
		}
		at, err1 := parseSpan(fields[0])
		n, err2 := strconv.ParseInt(fields[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: not a coverage line: %q", name, line)
		}
		counts[block{file: strings.TrimPrefix(line[:colon], module), span: at}] += n
	}
	return counts, sc.Err()
}

// report prints, per package and file, the functions with a block that
// ran, and the totals.
func report(w io.Writer, ran map[string][]span, skip *regexp.Regexp) error {
	files := make([]string, 0, len(ran))
	for file := range ran {
		if skip == nil || !skip.MatchString(file) {
			files = append(files, file)
		}
	}
	sort.Strings(files)
	packages := map[string]bool{}
	functions, listed := 0, 0
	var out strings.Builder
	for _, file := range files {
		names, err := functionsRun(file, ran[file])
		if err != nil {
			return err
		}
		if len(names) == 0 {
			continue
		}
		packages[path.Dir(file)] = true
		functions += len(names)
		listed++
		fmt.Fprintf(&out, "%-48s %s\n", file, strings.Join(names, ", "))
	}
	fmt.Fprintf(w, "%d functions in %d files in %d packages\n\n%s", functions, listed, len(packages), out.String())
	return nil
}

// functionsRun names the top-level functions and methods of file whose body
// holds a block that ran, in the order they are written.
func functionsRun(file string, blocks []span) ([]string, error) {
	fset := token.NewFileSet()
	parsed, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, decl := range parsed.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		if ranIn(blocks, fset, fn.Body) {
			names = append(names, name(fn))
		}
	}
	return names, nil
}

// name is fn's name, with its receiver's type for a method (Keeper.Guarded).
func name(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}
