package config_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/idemkeys/payments/internal/config"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestReferenceListsEverySetting holds docs/reference/configuration.md to
// the settings the code reads: every variable of Config is on the page once
// with its default, and the page names no variable the code does not read.
func TestReferenceListsEverySetting(t *testing.T) {
	rows := testkit.MarkdownTable(t, "docs/reference/configuration.md", "The API (`cmd/api`)")
	documented := map[string]string{}
	for _, row := range rows {
		if len(row) != 3 {
			t.Fatalf("row %q: want three cells (variable, default, meaning)", row)
		}
		if _, twice := documented[row[0]]; twice {
			t.Errorf("%s is documented twice", row[0])
		}
		documented[row[0]] = row[1]
	}

	read := map[string]bool{"OTEL_*": true} // tracing.FromEnv reads the standard OTEL_* variables
	typ := reflect.TypeFor[config.Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, ok := f.Tag.Lookup("env")
		if !ok {
			continue
		}
		read[name] = true
		doc, ok := documented[name]
		if !ok {
			t.Errorf("%s is read by the code but missing from the reference", name)
			continue
		}
		switch def := f.Tag.Get("envDefault"); {
		case def != "" && doc != def:
			t.Errorf("%s: the reference says the default is %q, the code %q", name, doc, def)
		case def == "" && !strings.HasPrefix(doc, "empty") && !strings.HasPrefix(doc, "the "):
			t.Errorf("%s: the code has no default; the reference says %q (write \"empty\" or what is used instead)", name, doc)
		}
	}
	for name := range documented {
		if !read[name] {
			t.Errorf("%s is in the reference but the code does not read it", name)
		}
	}
}
