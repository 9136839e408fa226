package app_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestREADMEWalkthrough runs the commands of the README's walkthrough, as
// written, with bash, curl and jq against the API binary started as `make
// run` starts it (development, embedded SQLite, in-process provider, every
// other setting at its default), and compares what they print with the
// answers the README shows under each. A shown line must match a printed
// line, in order; "…" in a shown line stands for anything (ids, times,
// ETags), and printed lines the README leaves out (Date, Content-Length,
// X-Request-Id) are not compared. A README whose samples drift from the
// API fails here.
func TestREADMEWalkthrough(t *testing.T) {
	testkit.EndToEnd(t)
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			testkit.MissingService(t, tool, err)
		}
	}
	steps := walkthroughSteps(t)

	apiBin, _ := apptest.Binaries(t)
	addr := testkit.FreeAddr(t)
	testkit.StartProcess(t, apiBin, addr, "DATABASE_URL=", "SQLITE_PATH="+filepath.Join(t.TempDir(), "payments.db"))

	// A terminal puts the prompt on a line of its own after an answer
	// without a final newline; here the next command's output would run
	// on, so each curl ends its output with one.
	script := strings.Builder{}
	script.WriteString("curl() { command curl \"$@\"; echo; }\n")
	for i, s := range steps {
		fmt.Fprintf(&script, "echo '@@@ step %d'\n%s\necho\n", i, s.commands)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script.String())
	cmd.Env = append(os.Environ(), "API=http://"+addr)
	out, err := cmd.CombinedOutput()
	printed := strings.Split(strings.ReplaceAll(string(out), "\r", ""), "@@@ step ")
	if err != nil {
		t.Fatalf("the walkthrough's commands failed: %v\n%s", err, out)
	}
	if len(printed) != len(steps)+1 {
		t.Fatalf("printed %d steps' output, want %d:\n%s", len(printed)-1, len(steps), out)
	}
	for i, s := range steps {
		got := strings.Split(printed[i+1], "\n")[1:] // after the marker's own line
		if err := matchInOrder(s.shown, got); err != nil {
			t.Errorf("step %d:\n%s\n%v\nprinted:\n%s", i, s.commands, err, strings.Join(got, "\n"))
		}
	}
}

// walkthroughStep is one sh block of the README's walkthrough and the
// answer block shown after it, if any.
type walkthroughStep struct {
	commands string
	shown    []string
}

// walkthroughSteps reads the "## Walkthrough" section of the README.
func walkthroughSteps(t *testing.T) []walkthroughStep {
	t.Helper()
	data, err := os.ReadFile(testkit.RepoFile(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n## Walkthrough\n")
	if start < 0 {
		t.Fatal("README.md has no ## Walkthrough section")
	}
	text = text[start+1:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	var steps []walkthroughStep
	for _, m := range regexp.MustCompile("(?s)```(sh)?\n(.*?)```").FindAllStringSubmatch(text, -1) {
		switch {
		case m[1] == "sh":
			steps = append(steps, walkthroughStep{commands: m[2]})
		case len(steps) > 0:
			last := &steps[len(steps)-1]
			for line := range strings.SplitSeq(strings.TrimSpace(m[2]), "\n") {
				last.shown = append(last.shown, strings.TrimSpace(line))
			}
		}
	}
	if len(steps) < 5 {
		t.Fatalf("found %d steps in the README's walkthrough", len(steps))
	}
	return steps
}

// matchInOrder reports the first shown line that no printed line matches
// after the previous match.
func matchInOrder(shown, printed []string) error {
	j := 0
	for _, want := range shown {
		parts := strings.Split(want, "…")
		for k, p := range parts {
			parts[k] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		for j < len(printed) && !re.MatchString(strings.TrimSpace(printed[j])) {
			j++
		}
		if j == len(printed) {
			return fmt.Errorf("the README shows %q, which the answer lacks (in this order)", want)
		}
		j++
	}
	return nil
}
