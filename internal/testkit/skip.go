package testkit

import (
	"os"
	"testing"
)

// MissingService skips the test, or fails it under CI=true, saying which
// service is missing and why.
func MissingService(t testing.TB, service string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required under CI=true but is not reachable: %v", service, err)
	}
	t.Skipf("SKIPPED: %s is not reachable (%v); start it or set CI=true to make this a failure", service, err)
}

// EndToEnd marks a test of the end-to-end tier: one that builds binaries,
// starts the project's processes (or a cluster of servers), runs the chaos
// or bench harness, or drives a browser. Under -short it skips the test, so
// that `go test -short ./...` is the quick tier of unit and database tests.
// Call it first, before the test starts anything.
func EndToEnd(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end tier (binaries, processes or a browser): skipped under -short")
	}
}

// requireEndToEnd fails a test that starts what only the end-to-end tier
// may start without having said so with EndToEnd.
func requireEndToEnd(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Fatalf("%s in a test of the quick tier: call testkit.EndToEnd(t) first", what)
	}
}
