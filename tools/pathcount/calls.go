package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"io"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// The calls of a request, at the grain of the design note's "steps": a
// step is a call from a function of one file to a function of another
// (decorators, phase transactions and store calls included), or the entry
// into a function of this repository from outside it (Gin calling a
// middleware, pgx calling a value's encoder, a function value called from
// anywhere), since those do not name their callee in our code.
//
// Coverage counts blocks, not calls, so a call is read from the source: a
// call expression of a function that ran, sitting in a block that ran, to
// a function that ran. A call through an interface names its method, not
// its callee: every function that ran and could answer it (a method of
// that name on a type that implements the interface) is a candidate, and
// the step lists them all. A call in a block that ran may still have been
// skipped (the right side of && or ||); a callee that ran confirms all but
// such a rare case.

// fn is a top-level function or method of the module: its file and the
// name pathcount lists it by.
type fn struct{ file, name string }

func (f fn) String() string { return f.file + " " + f.name }

// step is one cross-file call, or an entry from outside (from is zero).
type step struct {
	from fn
	to   []fn // more than one: the candidates of a call through an interface
}

// calls lists the request's steps: the cross-file calls between the
// functions that ran, and the entries into them from outside.
func calls(w io.Writer, ran map[string][]span, skip *regexp.Regexp) error {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports}
	pkgs, err := packages.Load(cfg, "./internal/...", "./cmd/...")
	if err != nil {
		return err
	}
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	rel := func(fset *token.FileSet, p token.Pos) string {
		r, err := filepath.Rel(root, fset.Position(p).Filename)
		if err != nil {
			return ""
		}
		return filepath.ToSlash(r)
	}
	counted := func(file string) bool { return len(ran[file]) > 0 && (skip == nil || !skip.MatchString(file)) }
	hit := func(file string, p token.Position) bool {
		at := pos{p.Line, p.Column}
		for _, s := range ran[file] {
			if !at.before(s.from) && !s.to.before(at) {
				return true
			}
		}
		return false
	}

	// Every function of the module that ran, by its object, and the
	// methods by name, for the calls through an interface.
	type decl struct {
		fn   fn
		body *ast.BlockStmt
		info *types.Info
		fset *token.FileSet
	}
	byObj := map[*types.Func]*decl{}
	methods := map[string][]*types.Func{}
	var order []*types.Func
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return fmt.Errorf("%s: %w", p.PkgPath, p.Errors[0])
		}
		for _, f := range p.Syntax {
			file := rel(p.Fset, f.Pos())
			if !counted(file) || strings.HasSuffix(file, "_test.go") {
				continue
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				obj, _ := p.TypesInfo.Defs[fd.Name].(*types.Func)
				if obj == nil || !ranIn(ran[file], p.Fset, fd.Body) {
					continue
				}
				byObj[obj] = &decl{fn: fn{file, name(fd)}, body: fd.Body, info: p.TypesInfo, fset: p.Fset}
				order = append(order, obj)
				if fd.Recv != nil {
					methods[obj.Name()] = append(methods[obj.Name()], obj)
				}
			}
		}
	}

	var steps []step
	called := map[*types.Func]bool{}
	seen := map[string]bool{}
	for _, obj := range order {
		d := byObj[obj]
		ast.Inspect(d.body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !hit(d.fn.file, d.fset.Position(call.Lparen)) {
				return true
			}
			var s step
			for _, c := range callees(d.info, call, methods) {
				// A method does not call itself through an interface: a
				// decorator calls what it wraps.
				if _, ran := byObj[c]; ran && c != obj {
					called[c] = true
					if byObj[c].fn.file != d.fn.file {
						s.to = append(s.to, byObj[c].fn)
					}
				}
			}
			if len(s.to) == 0 {
				return true // no call, or one within the file
			}
			sort.Slice(s.to, func(i, j int) bool { return s.to[i].String() < s.to[j].String() })
			s.from = d.fn
			key := fmt.Sprint(s.from, s.to)
			if !seen[key] {
				seen[key] = true
				steps = append(steps, s)
			}
			return true
		})
	}
	for _, obj := range order {
		if !called[obj] {
			steps = append(steps, step{to: []fn{byObj[obj].fn}})
		}
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].from.file < steps[j].from.file })

	files := map[string]bool{}
	for _, obj := range order {
		files[byObj[obj].fn.file] = true
	}
	entries := 0
	var out strings.Builder
	for _, s := range steps {
		var to []string
		for _, t := range s.to {
			to = append(to, t.String())
		}
		from := "(from outside: a dependency or a function value)"
		if s.from.file == "" {
			entries++
		} else {
			from = s.from.String()
		}
		fmt.Fprintf(&out, "%-72s -> %s\n", from, strings.Join(to, " | "))
	}
	fmt.Fprintf(w, "%d steps: %d cross-file calls and %d entries from outside, between %d functions in %d files\n",
		len(steps), len(steps)-entries, entries, len(order), len(files))
	crossing, pairs, entered := packageCrossings(steps)
	fmt.Fprintf(w, "by package: %d of the calls go into another package, over %d pairs of packages; the entries reach %d packages\n\n%s",
		crossing, pairs, entered, out.String())
	return nil
}

// packageCrossings reads the steps at the grain of packages, the floor
// that merging files cannot lower: the calls whose callee (one candidate
// of it, through an interface) lies in another package than the caller,
// the distinct (caller package, callee package) pairs they make, and the
// packages that the entries from outside reach.
func packageCrossings(steps []step) (crossing, pairs, entered int) {
	pair := map[[2]string]bool{}
	reached := map[string]bool{}
	for _, s := range steps {
		if s.from.file == "" {
			reached[path.Dir(s.to[0].file)] = true
			continue
		}
		from, crossed := path.Dir(s.from.file), false
		for _, t := range s.to {
			if to := path.Dir(t.file); to != from {
				crossed, pair[[2]string{from, to}] = true, true
			}
		}
		if crossed {
			crossing++
		}
	}
	return crossing, len(pair), len(reached)
}

// callees are the functions call may call: the one it names, or, through
// an interface, every method of that name whose receiver implements it. A
// call through a variable or field of a function type names no callee.
func callees(info *types.Info, call *ast.CallExpr, methods map[string][]*types.Func) []*types.Func {
	fun := ast.Unparen(call.Fun)
	if ix, ok := fun.(*ast.IndexExpr); ok { // F[T](…)
		fun = ix.X
	} else if ix, ok := fun.(*ast.IndexListExpr); ok {
		fun = ix.X
	}
	var id *ast.Ident
	switch f := fun.(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		if sel := info.Selections[f]; sel != nil && sel.Kind() == types.MethodVal {
			if iface, ok := sel.Recv().Underlying().(*types.Interface); ok {
				return implementations(iface, f.Sel.Name, methods)
			}
			if recv := sel.Obj().(*types.Func).Signature().Recv(); recv != nil {
				if iface, ok := recv.Type().Underlying().(*types.Interface); ok { // an embedded interface
					return implementations(iface, f.Sel.Name, methods)
				}
			}
		}
		id = f.Sel
	default:
		return nil
	}
	if obj, ok := info.Uses[id].(*types.Func); ok {
		return []*types.Func{obj.Origin()}
	}
	return nil
}

// implementations are the methods named name whose receiver's type (or a
// pointer to it) implements iface.
func implementations(iface *types.Interface, name string, methods map[string][]*types.Func) []*types.Func {
	var out []*types.Func
	for _, m := range methods[name] {
		t := m.Signature().Recv().Type()
		if p, ok := t.(*types.Pointer); ok {
			t = p.Elem()
		}
		if named, ok := t.(*types.Named); ok && named.TypeParams().Len() > 0 {
			out = append(out, m) // a generic type: take the name's word for it
			continue
		}
		if types.Implements(t, iface) || types.Implements(types.NewPointer(t), iface) {
			out = append(out, m)
		}
	}
	return out
}
