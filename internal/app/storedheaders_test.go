package app_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestReplayedCreateCarriesItsETag: the headers that describe the result
// are stored with the answer (Config.StoredHeaders), so a replayed create
// carries the first answer's ETag and Location, marked as a replay, and
// nothing is created twice.
func TestReplayedCreateCarriesItsETag(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			w := apptest.Start(t, testkit.DatabaseURL(t, dialect))
			first := apptest.Call(t, "POST", w.URL+"/v1/orders", "sk_test_acme", "etag-replay", apptest.OrderBody)
			require.Equal(t, 201, first.Status, string(first.Body))
			require.Equal(t, `"1"`, first.Header.Get("ETag"))
			replay := apptest.Call(t, "POST", w.URL+"/v1/orders", "sk_test_acme", "etag-replay", apptest.OrderBody)
			require.Equal(t, 201, replay.Status, string(replay.Body))
			require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
			require.Equal(t, `"1"`, replay.Header.Get("ETag"))
			require.Equal(t, first.Header.Get("Location"), replay.Header.Get("Location"))
			require.Equal(t, first.Body, replay.Body)
			require.EqualValues(t, 1, w.Count(t, "SELECT count(*) FROM orders"))
		})
	}
}
