package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/idemcheck"
	"github.com/idemkeys/payments/internal/testkit"
)

// The page docs/guide/idemcheck.md is kept true by these tests: its table
// of checks is the catalogue, its table of flags the command's, and its
// side-by-side report the verdicts the end-to-end tests assert.

const page = "docs/guide/idemcheck.md"

func TestPageListsTheCatalogue(t *testing.T) {
	rows := testkit.MarkdownTable(t, page, "The checks")
	checks := idemcheck.Checks()
	require.Len(t, rows, len(checks))
	for i, c := range checks {
		require.Equal(t, []string{c.ID, string(c.Level), c.Rule, c.Source, c.Needs}, rows[i], "row %d", i+1)
	}
}

func TestPageListsEveryFlag(t *testing.T) {
	_, _, usage := runArgs("-h")
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(usage, -1) {
		flags = append(flags, "-"+m[1])
	}
	var documented []string
	for _, row := range testkit.MarkdownTable(t, page, "Flags") {
		documented = append(documented, row[0])
	}
	require.ElementsMatch(t, flags, documented)
}

func TestPageShowsTheVerdictsTheTestsAssert(t *testing.T) {
	rows := testkit.MarkdownTable(t, page, "This API and Fiber, side by side")
	require.Len(t, rows, len(idemcheck.Checks()))
	// The first word of a cell is its verdict ("**fail**: …", "pass: 422").
	verdictOf := func(cell string) string {
		w, _, _ := strings.Cut(strings.Trim(cell, "*"), ":")
		w, _, _ = strings.Cut(w, " ")
		return strings.Trim(w, "*")
	}
	for _, row := range rows {
		id := row[0]
		c, ok := idemcheck.Lookup(id)
		require.True(t, ok, id)
		require.Equal(t, string(c.Level), row[1], id)
		orders, payments := "pass", "pass"
		if slices.Contains(ordersNotApplicable, id) {
			orders = "n/a"
		}
		if slices.Contains(paymentsNotApplicable, id) {
			payments = "n/a"
		}
		if id == idemcheck.Timing { // figures, not a verdict
			continue
		}
		require.Equal(t, orders, verdictOf(row[2]), "%s, this API's orders", id)
		require.Equal(t, payments, verdictOf(row[3]), "%s, this API's payments", id)
		require.Equal(t, string(fiberVerdicts[id].verdict), verdictOf(row[4]), "%s, Fiber", id)
	}
}
