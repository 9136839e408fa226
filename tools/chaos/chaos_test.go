package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/tools/harness"
)

// TestShortProfile runs every scenario at about a tenth of the full size and
// fails if any audit finds a duplicate, a stuck record or another violation.
func TestShortProfile(t *testing.T) {
	testkit.EndToEnd(t)
	if err := harness.Available(); err != nil {
		testkit.MissingService(t, "PostgreSQL server programs or redis-server", err)
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"-profile", "short", "-out", ""}, &out)
	t.Log(out.String())
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			t.Fatalf("a process failed: %v", err)
		}
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "storm") {
		t.Fatal("the report has no storm row")
	}
}
