package testkit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RepoFile returns the path of a file given relative to the repository's
// root (where go.mod is), found from the test's working directory.
func RepoFile(t testing.TB, rel string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("%v; cannot find %s", err, rel)
	}
	return filepath.Join(root, filepath.FromSlash(rel))
}

// RepoRoot is the repository's root: the nearest directory at or above
// the working directory that holds a go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// MarkdownTable returns the body rows of the first table under the heading
// (a line "## heading" or "### heading", any level) of the Markdown file at
// rel from the repository's root, each row its cells trimmed, with the
// backticks around a whole cell removed. The test fails when the heading or
// its table is missing, so a page cannot lose the table it is checked by.
func MarkdownTable(t testing.TB, rel, heading string) [][]string {
	t.Helper()
	data, err := os.ReadFile(RepoFile(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	under, inTable := false, false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			if under && inTable {
				break
			}
			under = strings.TrimSpace(strings.TrimLeft(line, "#")) == heading
			continue
		}
		if !under {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		if !inTable { // the header row
			inTable = true
			continue
		}
		cells := splitRow(line)
		if len(cells) > 0 && strings.Trim(cells[0], "-: ") == "" {
			continue // the delimiter row
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table under the heading %q", rel, heading)
	}
	return rows
}

// splitRow splits a table row on the pipes that are not inside a code span
// or escaped.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cell strings.Builder
	inCode := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case c == '`':
			inCode = !inCode
			cell.WriteByte(c)
		case c == '|' && !inCode:
			cells = append(cells, Unquote(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(c)
		}
	}
	return append(cells, Unquote(cell.String()))
}

// Unquote trims a cell and removes the backticks around it when the whole
// cell is one code span.
func Unquote(cell string) string {
	cell = strings.TrimSpace(cell)
	if len(cell) >= 2 && cell[0] == '`' && cell[len(cell)-1] == '`' && !strings.Contains(cell[1:len(cell)-1], "`") {
		return cell[1 : len(cell)-1]
	}
	return cell
}
