// Package docs holds the prose (the README's guide and references) and the
// tests that keep it honest: a name the docs put in backticks exists in the
// code, and a link leads somewhere. The tests read the repository's files;
// they build nothing and need no service, so they run in the quick tier.
package docs

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// allowed are the backticked names the docs may use although the code of
// this repository does not declare them. Keep it short; each says why.
var allowed = map[string]string{
	"application/json":         "a media type, not a path",
	"application/problem+json": "a media type, not a path",
	"http/protobuf":            "an OTLP protocol value, not a path",
	"./data/":                  "made by make run; not in the repository",
	"data/payments.db":         "made by make run; not in the repository",
	"deploy/compose.env":       "made by make compose-env; not in the repository",
	"bin/api":                  "made by make build; not in the repository",
	"n/a":                      "a verdict idemcheck prints (idemcheck.NotApplicable), not a path",
	// A media type the API refuses with 415; contenttype.go names it in a
	// comment and its tests send it, but no string of the code spells it.
	"application/merge-patch+json": "a media type the API refuses (415)",
	// PostgreSQL's and PgBouncer's own names, for the failover runbook.
	"pg_rewind":                      "a PostgreSQL tool",
	"pg_stat_replication.replay_lag": "a PostgreSQL statistics view column",
	"replay_lsn":                     "a column of PostgreSQL's pg_stat_replication",
	"max_prepared_statements":        "a PgBouncer setting",
	"ProblemNNN":                     "a placeholder for Problem400, Problem404, ...",
	"max_age":                        "JetStream's name of the stream setting outbox.JetStreamMaxAge sets",
	// A NATS subject built at run time: outbox.events.<type>.
	"outbox.events.payment.succeeded": "a subject the outbox builds from an event type",
	// Read by the OpenTelemetry SDK, not by our code.
	"OTEL_RESOURCE_ATTRIBUTES": "read by the OpenTelemetry SDK",
	"OTEL_TRACES_SAMPLER":      "read by the OpenTelemetry SDK",
	"OTEL_TRACES_SAMPLER_ARG":  "read by the OpenTelemetry SDK",
	// A file of another project that a design note compares with.
	"sqldb/tran.go": "ardanlabs/service's transaction helper",
}

// foreign are the names of packages (and the project's name for a
// gin.Context) of the standard library or a dependency, whose members the
// docs may name without this test looking them up.
var foreign = map[string]bool{
	"http": true, // net/http
	"c":    true, // every handler's *gin.Context
	"ctx":  true, // every context.Context
}

// TestDocsNameWhatExists reads every code span of the README and docs/ and
// holds the ones that name code to the code: a path or file name exists, a
// Pkg.Name or Type.Method is declared, a setting (UPPER_SNAKE) and a code or
// field (lower_snake) appear in the code's strings, and a Go-looking name
// (mixedCase) is declared somewhere. Words, values, routes and commands are
// not checked.
//
// The design notes in docs/design/ are held too: a fork reads them as the
// recipe, so they name what exists; the code of before is in the history.
func TestDocsNameWhatExists(t *testing.T) {
	root := repoRoot(t)
	code := indexCode(t, root)
	for _, page := range pages(t, root) {
		spans := codeSpans(t, filepath.Join(root, page))
		spans = append(spans, diagramNames(t, filepath.Join(root, page))...)
		for _, span := range spans {
			if _, ok := allowed[span.text]; ok {
				continue
			}
			if why := code.check(span.text, path.Dir(page)); why != "" {
				t.Errorf("%s:%d: `%s` %s", page, span.line, span.text, why)
			}
		}
	}
}

// TestDocsLinksResolve holds every relative link of the README and docs/ to
// a file of the repository, and a link's #anchor to a heading of the page it
// names (GitHub's anchors: lower case, punctuation dropped, spaces to
// hyphens, -1, -2 for repeats).
func TestDocsLinksResolve(t *testing.T) {
	root := repoRoot(t)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		anchors[page] = headingAnchors(t, filepath.Join(root, page))
		return anchors[page]
	}
	for _, page := range pages(t, root) {
		for _, l := range links(t, filepath.Join(root, page)) {
			target, anchor, _ := strings.Cut(l.text, "#")
			dest := page
			if target != "" {
				dest = path.Join(path.Dir(page), target)
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", page, l.line, l.text)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
				t.Errorf("%s:%d: link to %s: %s has no heading #%s", page, l.line, l.text, dest, anchor)
			}
		}
	}
}

// pages lists the README and every Markdown file under docs/, relative to
// the root, with forward slashes.
func pages(t *testing.T, root string) []string {
	t.Helper()
	list := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			list = append(list, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// A span is a piece of a page: a code span's text or a link's target, and
// the line it starts on.
type span struct {
	text string
	line int
}

// prose returns the page's lines with fenced code blocks blanked, so that
// neither shell sessions nor diagrams are read as prose (line numbers stay).
func prose(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return lines
}

// codeSpans returns the page's inline code spans outside fenced blocks, a
// span broken over lines joined with one space.
func codeSpans(t *testing.T, file string) []span {
	t.Helper()
	text := strings.Join(prose(t, file), "\n")
	var spans []span
	line := 1
	for i := 0; i < len(text); {
		if text[i] == '\n' {
			line++
			i++
			continue
		}
		if text[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(text) && text[i+n] == '`' {
			n++
		}
		ticks := text[i : i+n]
		end := strings.Index(text[i+n:], ticks)
		if end < 0 {
			i += n
			continue
		}
		body := text[i+n : i+n+end]
		spans = append(spans, span{text: strings.Join(strings.Fields(body), " "), line: line})
		line += strings.Count(body, "\n")
		i += n + end + n
	}
	return spans
}

var diagramNameRE = regexp.MustCompile(`\*?\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|\b[A-Za-z_]\w*\(`)

// diagramNames returns what a Mermaid diagram names the way code is named:
// Pkg.Name, Type.Method, a call Name(...).
func diagramNames(t *testing.T, file string) []span {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []span
	in := false
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```mermaid"):
			in = true
		case strings.HasPrefix(trimmed, "```"):
			in = false
		case in:
			for _, name := range diagramNameRE.FindAllString(line, -1) {
				if strings.HasSuffix(name, "(") {
					name += ")"
				}
				out = append(out, span{text: name, line: i + 1})
			}
		}
	}
	return out
}

var linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)|(?m)^\s*\[[^\]]+\]:\s*(\S+)`)

// links returns the page's relative link targets outside code.
func links(t *testing.T, file string) []span {
	t.Helper()
	lines := prose(t, file)
	for i, l := range lines { // a link inside a code span is not a link
		lines[i] = codeSpanRE.ReplaceAllString(l, "``")
	}
	text := strings.Join(lines, "\n")
	var out []span
	for _, m := range linkRE.FindAllStringSubmatchIndex(text, -1) {
		target := ""
		switch {
		case m[2] >= 0:
			target = text[m[2]:m[3]]
		case m[4] >= 0:
			target = text[m[4]:m[5]]
		}
		if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		out = append(out, span{text: target, line: 1 + strings.Count(text[:m[0]], "\n")})
	}
	return out
}

var codeSpanRE = regexp.MustCompile("`[^`]*`")

// headingAnchors returns the anchors GitHub gives the page's headings.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(t, file) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// code is what the repository declares and spells, read from its files.
type code struct {
	root string
	// files are the repository's paths (files and folders, forward slashes).
	files map[string]bool
	// bases are the base names of its files.
	bases map[string]bool
	// pkgs maps a Go package name (and its folder's name) to what it
	// declares at top level.
	pkgs map[string]map[string]bool
	// members maps a type name to its methods and fields; embedded lists
	// the types a type embeds.
	members  map[string]map[string]bool
	embedded map[string][]string
	// declared is every declared name: top level, methods, fields.
	declared map[string]bool
	// memberNames is every method and field name.
	memberNames map[string]bool
	// words are the tokens of the code's strings (Go string literals and
	// struct tags outside tests) and of its other source files (SQL,
	// YAML, JavaScript, the Makefile, scripts).
	words map[string]bool
}

// Folders that hold no code of the repository.
var skipDirs = map[string]bool{".git": true, "data": true, "node_modules": true, "testdata": true}

var wordRE = regexp.MustCompile(`[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*`)

func indexCode(t *testing.T, root string) *code {
	t.Helper()
	c := &code{
		root: root, files: map[string]bool{}, bases: map[string]bool{},
		pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{},
		embedded: map[string][]string{}, declared: map[string]bool{},
		memberNames: map[string]bool{}, words: map[string]bool{},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && skipDirs[d.Name()] {
			return fs.SkipDir
		}
		c.files[rel] = true
		c.bases[d.Name()] = true
		if d.IsDir() {
			return nil
		}
		switch ext := path.Ext(rel); {
		case ext == ".go":
			c.addGo(t, fset, p, rel)
		case ext == ".sql" || ext == ".yml" || ext == ".yaml" || ext == ".js" || ext == ".html" ||
			ext == ".sh" || ext == ".json" || ext == ".example" ||
			d.Name() == "Makefile" || d.Name() == "Dockerfile" || strings.HasPrefix(rel, ".ci/") || strings.HasPrefix(rel, "scripts/"):
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			c.addWords(string(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *code) addWords(s string) {
	for _, w := range wordRE.FindAllString(s, -1) {
		c.words[w] = true
		for part := range strings.SplitSeq(w, ".") {
			c.words[part] = true
		}
	}
}

func (c *code) addGo(t *testing.T, fset *token.FileSet, file, rel string) {
	t.Helper()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	test := strings.HasSuffix(rel, "_test.go")
	names := []string{strings.TrimSuffix(f.Name.Name, "_test"), path.Base(path.Dir(rel))}
	declare := func(name string) {
		c.declared[name] = true
		for _, pkg := range names {
			if c.pkgs[pkg] == nil {
				c.pkgs[pkg] = map[string]bool{}
			}
			c.pkgs[pkg][name] = true
		}
	}
	member := func(typ, name string) {
		if c.members[typ] == nil {
			c.members[typ] = map[string]bool{}
		}
		c.members[typ][name] = true
		c.declared[name] = true
		c.memberNames[name] = true
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				declare(d.Name.Name)
			} else {
				member(typeName(d.Recv.List[0].Type), d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						declare(n.Name)
					}
				case *ast.TypeSpec:
					declare(s.Name.Name)
					c.addMembers(s.Name.Name, s.Type, member)
				}
			}
		}
	}
	if test {
		return
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				c.addWords(s)
			}
		}
		return true
	})
}

func (c *code) addMembers(typ string, expr ast.Expr, member func(typ, name string)) {
	var fields *ast.FieldList
	switch e := expr.(type) {
	case *ast.StructType:
		fields = e.Fields
	case *ast.InterfaceType:
		fields = e.Methods
	default:
		return
	}
	for _, f := range fields.List {
		if len(f.Names) == 0 {
			c.embedded[typ] = append(c.embedded[typ], typeName(f.Type))
			member(typ, typeName(f.Type))
		}
		for _, n := range f.Names {
			member(typ, n.Name)
		}
	}
}

// typeName is the bare name of a receiver or embedded type: T for *T,
// pkg.T, T[P].
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

var (
	callRE     = regexp.MustCompile(`^(\*?[A-Za-z_][A-Za-z0-9_.]*)\(.*\)$`)
	pathRE     = regexp.MustCompile(`^[\w.@+-]+(/[\w.@+-]+)*/?$`)
	fileRE     = regexp.MustCompile(`^[\w.-]+\.(go|md|sql|yml|yaml|json|sh|js|css|html|mod|example)$`)
	settingRE  = regexp.MustCompile(`^([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(=.*)?$`)
	selectorRE = regexp.MustCompile(`^\*?[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$`)
	identRE    = regexp.MustCompile(`^[A-Za-z_]\w*$`)
	snakeRE    = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)+$`)
)

// check says what is wrong with a code span that names code, or "" when it
// exists or names no code. dir is the page's folder, for relative paths.
func (c *code) check(s, dir string) string {
	if m := callRE.FindStringSubmatch(s); m != nil { // Name(args): the name
		s = m[1]
	}
	switch {
	case strings.Contains(s, "/"):
		return c.checkPath(s, dir)
	case fileRE.MatchString(s) || s == "Makefile" || s == "Dockerfile":
		if !c.bases[s] {
			return "names a file the repository does not have"
		}
	case settingRE.MatchString(s):
		if name := settingRE.FindStringSubmatch(s)[1]; !c.words[name] && allowed[name] == "" {
			return "is a setting no code reads"
		}
	case selectorRE.MatchString(s):
		return c.checkSelector(s)
	case identRE.MatchString(s) && hasUpperAndLower(s):
		if !c.declared[s] && !c.words[s] {
			return "is declared nowhere in the code"
		}
	case snakeRE.MatchString(s):
		if !c.words[s] {
			return "appears in no string of the code (problem code, field, table, metric)"
		}
	}
	return ""
}

func hasUpperAndLower(s string) bool {
	return strings.ContainsFunc(s, unicode.IsUpper) && strings.ContainsFunc(s, unicode.IsLower)
}

// checkPath holds a path to the repository: from the root, from the page's
// folder, or as the tail of a path (gormstore/ for
// internal/idempotency/gormstore/). Routes (/v1/...), URLs and commands are
// not paths; a standard library package (log/slog) is one of Go's.
func (c *code) checkPath(s, dir string) string {
	if strings.HasPrefix(s, "/") || !pathRE.MatchString(s) {
		return ""
	}
	p := strings.TrimSuffix(strings.TrimPrefix(s, "./"), "/")
	p = strings.TrimPrefix(strings.TrimPrefix(p, "github.com/idemkeys/payments"), "/")
	if p == "" || c.files[p] || c.files[path.Join(dir, p)] {
		return ""
	}
	first, _, _ := strings.Cut(p, "/")
	if c.files[first] {
		return "is not in the repository"
	}
	for f := range c.files {
		if strings.HasSuffix(f, "/"+p) {
			return ""
		}
	}
	if pkg, err := build.Default.Import(p, c.root, build.FindOnly); err == nil && pkg.Goroot {
		return ""
	}
	return "is not in the repository"
}

// checkSelector holds X.Y (and X.Y.Z) to the code: Y declared by package
// X, or a method or field of type X, or (X a variable) of some type; the
// rest of a chain a method or field of some type. A dotted string the code
// spells (a span attribute, an event type) passes too.
func (c *code) checkSelector(s string) string {
	if c.words[strings.TrimPrefix(s, "*")] {
		return ""
	}
	parts := strings.Split(strings.TrimPrefix(s, "*"), ".")
	if s == strings.ToLower(s) && !slices.ContainsFunc(parts, func(p string) bool { return !c.words[p] }) {
		return "" // table.column, a JSON member's path: words of the code
	}
	x, y := parts[0], parts[1]
	if foreign[x] {
		return ""
	}
	switch {
	case c.pkgs[x] != nil:
		if !c.pkgs[x][y] {
			return "package " + x + " declares no " + y
		}
	case c.members[x] != nil || c.declared[x] && unicode.IsUpper(rune(x[0])):
		if !c.hasMember(x, y, nil) {
			return "type " + x + " has no method or field " + y
		}
	default:
		if !c.memberNames[y] {
			return "no type has a method or field " + y
		}
	}
	for _, z := range parts[2:] {
		if !c.memberNames[z] {
			return "no type has a method or field " + z
		}
	}
	return ""
}

func (c *code) hasMember(typ, name string, seen []string) bool {
	if c.members[typ][name] {
		return true
	}
	if slices.Contains(seen, typ) {
		return false
	}
	for _, e := range c.embedded[typ] {
		if c.hasMember(e, name, append(seen, typ)) {
			return true
		}
	}
	return false
}
