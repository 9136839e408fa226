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
