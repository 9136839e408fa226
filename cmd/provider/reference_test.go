package main

import (
	"strings"
	"testing"

	"github.com/idemkeys/payments/internal/testkit"
)

// TestReferenceListsEverySetting holds the provider's table in
// docs/reference/configuration.md to the variables loadConfig asks for.
func TestReferenceListsEverySetting(t *testing.T) {
	documented := map[string]bool{}
	for _, row := range testkit.MarkdownTable(t, "docs/reference/configuration.md", "The mock provider (`cmd/provider`)") {
		documented[row[0]] = true
	}
	read := map[string]bool{}
	if _, _, _, err := loadConfig(func(name string) string {
		if strings.HasPrefix(name, "OTEL_") {
			name = "OTEL_*"
		}
		read[name] = true
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	for name := range read {
		if !documented[name] {
			t.Errorf("%s is read by cmd/provider but missing from the reference", name)
		}
	}
	for name := range documented {
		if !read[name] {
			t.Errorf("%s is in the reference but cmd/provider does not read it", name)
		}
	}
}
