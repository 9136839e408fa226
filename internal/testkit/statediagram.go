package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Diagram is a Mermaid state diagram (stateDiagram-v2) as a test reads it:
// its states and its transitions. "[*]" is the start or the end.
type Diagram struct {
	// States maps each state to the composite state it is drawn inside
	// ("" at the top level).
	States map[string]string
	// Transitions are the arrows, in the order drawn.
	Transitions []Transition
}

// Transition is one arrow of a Diagram. Its label is read as a list of
// names separated by commas, each name optionally followed by a remark in
// parentheses: "take over (lock run out), Checkpoint" names "take over" and
// "Checkpoint".
type Transition struct {
	From, To string
	// Names are the names of the label, remarks dropped.
	Names []string
	// Line is the line of the Markdown file the arrow is drawn on.
	Line int
}

// TopStates returns the states drawn at the top level, "[*]" aside.
func (d Diagram) TopStates() []string {
	var top []string
	for s, parent := range d.States {
		if parent == "" && s != "[*]" {
			top = append(top, s)
		}
	}
	return top
}

var (
	arrowRE     = regexp.MustCompile(`^(\S+)\s*-->\s*(\S+)\s*(?::\s*(.*))?$`)
	compositeRE = regexp.MustCompile(`^state\s+(\S+)\s*\{$`)
	aliasRE     = regexp.MustCompile(`^state\s+"[^"]*"\s+as\s+(\S+)$`)
)

// StateDiagram reads the first ```mermaid block under the heading (any
// level) of the Markdown file at rel from the repository's root, and parses
// the part of stateDiagram-v2 the docs use: arrows with labels, composite
// states (state X { ... }), described states (state "..." as X), notes,
// comments and direction. The test fails when the heading, the block or a
// line it cannot read is missing or wrong, so a picture cannot drift out of
// the test's sight.
func StateDiagram(t testing.TB, rel, heading string) Diagram {
	t.Helper()
	data, err := os.ReadFile(RepoFile(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	d := Diagram{States: map[string]string{}}
	var parents []string
	under, in, found, inNote := false, false, false, false
	add := func(state string) {
		if _, ok := d.States[state]; !ok {
			d.States[state] = strings.Join(parents, "/")
		}
	}
	for i, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		switch {
		case !in && strings.HasPrefix(line, "#"):
			if found {
				return d
			}
			under = strings.TrimSpace(strings.TrimLeft(line, "#")) == heading
			continue
		case !in && under && line == "```mermaid":
			in = true
			continue
		case !in:
			continue
		case line == "```":
			if !found {
				t.Fatalf("%s: the diagram under %q is not a stateDiagram-v2", rel, heading)
			}
			return d
		}
		switch m := arrowRE.FindStringSubmatch(line); {
		case inNote:
			inNote = line != "end note"
		case line == "" || strings.HasPrefix(line, "%%") || strings.HasPrefix(line, "direction ") ||
			strings.HasPrefix(line, "classDef ") || strings.HasPrefix(line, "class "):
		case line == "stateDiagram-v2":
			found = true
		case strings.HasPrefix(line, "note "):
			inNote = !strings.Contains(line, ":")
		case compositeRE.MatchString(line):
			name := compositeRE.FindStringSubmatch(line)[1]
			add(name)
			parents = append(parents, name)
		case line == "}":
			if len(parents) == 0 {
				t.Fatalf("%s:%d: a } closes no state", rel, i+1)
			}
			parents = parents[:len(parents)-1]
		case aliasRE.MatchString(line):
			add(aliasRE.FindStringSubmatch(line)[1])
		case m != nil:
			add(m[1])
			add(m[2])
			d.Transitions = append(d.Transitions, Transition{From: m[1], To: m[2], Names: labelNames(m[3]), Line: i + 1})
		default:
			t.Fatalf("%s:%d: a line of the state diagram this test cannot read: %q", rel, i+1, line)
		}
	}
	t.Fatalf("%s: no state diagram under the heading %q", rel, heading)
	return d
}

// labelNames splits a label on the commas outside parentheses and drops
// each part's remark in parentheses.
func labelNames(label string) []string {
	var names []string
	depth, start := 0, 0
	flush := func(end int) {
		part := label[start:end]
		if i := strings.Index(part, "("); i >= 0 {
			part = part[:i]
		}
		if part = strings.TrimSpace(part); part != "" {
			names = append(names, part)
		}
	}
	for i, r := range label {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				flush(i)
				start = i + 1
			}
		}
	}
	flush(len(label))
	return names
}

// StringConsts returns the string constants of type typ declared in the
// non-test Go files of the package at dir (from the repository's root),
// value to name: the states a state machine's code has, read from the
// source, so that a state added to the code is one the test sees.
func StringConsts(t testing.TB, dir, typ string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(RepoFile(t, dir), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
					continue
				}
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: %s is not a string literal", dir, name.Name)
					}
					value, _ := strconv.Unquote(lit.Value)
					consts[value] = name.Name
				}
			}
		}
	}
	if len(consts) == 0 {
		t.Fatalf("%s declares no constant of type %s", dir, typ)
	}
	return consts
}
