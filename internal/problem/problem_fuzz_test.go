package problem

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzProblemJSON reads problem bodies as clients and tests do. It never
// panics, and a problem it reads writes back to one that reads the same:
// the standard members keep their values and extension members their
// names. The seed corpus is in testdata/fuzz/FuzzProblemJSON.
func FuzzProblemJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Problem
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("a problem read from %q does not write: %v", data, err)
		}
		var again Problem
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("%q does not read back: %v", out, err)
		}
		if again.Type != p.Type || again.Title != p.Title || again.Status != p.Status ||
			again.Detail != p.Detail || again.Code != p.Code ||
			// An empty errors list is left out when written: compare contents.
			len(again.Errors) != len(p.Errors) || len(p.Errors) > 0 && !reflect.DeepEqual(again.Errors, p.Errors) {
			t.Fatalf("round trip changed the problem: %+v -> %+v", p, again)
		}
		if len(again.Extra) != len(p.Extra) {
			t.Fatalf("extension members %v -> %v", p.Extra, again.Extra)
		}
	})
}
