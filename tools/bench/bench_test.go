package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/tools/harness"
)

// TestQuickRun runs the whole load generator on its smallest settings: it
// builds both API builds, starts the private stores and every instance,
// and goes through every phase. run fails when a request fails or a retry
// storm's key makes other than exactly one order with one answer; the test
// also checks that the report names every target.
func TestQuickRun(t *testing.T) {
	testkit.EndToEnd(t)
	if err := harness.Available(); err != nil {
		testkit.MissingService(t, "PostgreSQL server programs or redis-server", err)
	}
	var out bytes.Buffer
	err := run(t.Context(), []string{"-quick", "-out", "", "-storm", "300", "-micro=false"}, &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(a) raw SQL", "(b) create without idempotency", "(c) idempotent create",
		"(g) create, key reserved", "(d) replay from PostgreSQL", "(e) replay from Redis", "(d1) replay of one key", "(e1) replay of one key", "API CPU µs/req", "peak RSS", "retry storm without Redis", "retry storm with Redis",
		"| 1001 |", "janitor purging", "(w) idempotent create, default settings", "CPU µs/req, whole process",
		"(h') the same, tracing on", "(h'') the same, one trace in ten", "query-exec mode", "load 1m", "(z) the floor", "(z') the floor, reading the record first", "(z1) replay of one key, the floor",
		"(r) retry on instance B", "(r) the floor's retry on instance B", "no rolled-back transaction per retry",
		"(r) the peer's retry on instance B", "the peer's retry on its B", "the peer: one order per stored answer",
		"(h'') at once with (h)", "the two at the same time"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
