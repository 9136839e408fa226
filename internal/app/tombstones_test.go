package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestTombstonesOverHTTP: with IDEMPOTENCY_TOMBSTONES=true a key used past
// its TTL executes nothing, before and after the janitor purged its record;
// without, the contract's behaviour stands and the key is new again.
func TestTombstonesOverHTTP(t *testing.T) {
	for _, dialect := range testkit.Dialects {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dbURL := testkit.DatabaseURL(t, dialect)
			// A long janitor interval first, so that the expired record is
			// seen before its purge; the second instance purges at once.
			api := apptest.Start(t, dbURL, apptest.Env("IDEMPOTENCY_TTL=1s", "IDEMPOTENCY_TOMBSTONES=true", "JANITOR_INTERVAL=1h"))
			orders := func() int64 { return testkit.Count(t, dbURL, "SELECT count(*) FROM orders") }
			create := func(api *apptest.API, body string) apptest.Answer {
				return apptest.Call(t, "POST", api.URL+"/v1/orders", "sk_test_acme", "late-key", body)
			}
			first := create(api, apptest.OrderBody)
			require.Equal(t, 201, first.Status, string(first.Body))

			var late apptest.Answer
			testkit.Eventually(t, 10*time.Second, "the record expires", func() bool {
				late = create(api, apptest.OrderBody)
				return late.Status != 201
			})
			checkExpired := func(api *apptest.API) {
				t.Helper()
				late := create(api, apptest.OrderBody)
				require.Equal(t, 409, late.Status, string(late.Body))
				require.Equal(t, "idempotency_key_expired", late.JSON(t)["code"])
				require.Empty(t, late.Header.Get("Idempotent-Replayed"), "the layer's own answer, not a replay")
				other := create(api, strings.Replace(apptest.OrderBody, "cus_1", "cus_2", 1))
				require.Equal(t, 422, other.Status, string(other.Body))
				require.Equal(t, "idempotency_key_reused", other.JSON(t)["code"])
				require.EqualValues(t, 1, orders(), "a late reuse executes nothing")
				look := apptest.Call(t, "GET", api.URL+"/v1/idempotency-keys/late-key", "sk_test_acme", "", "")
				require.Equal(t, 404, look.Status, "an expired key has no live record: %s", look.Body)
			}
			checkExpired(api)
			require.EqualValues(t, 1, testkit.Count(t, dbURL, "SELECT count(*) FROM idempotency_records"), "not purged yet")

			purger := apptest.Start(t, dbURL, apptest.Env("IDEMPOTENCY_TTL=1s", "IDEMPOTENCY_TOMBSTONES=true", "JANITOR_INTERVAL=100ms"))
			testkit.Eventually(t, 10*time.Second, "the janitor leaves a tombstone", func() bool {
				return testkit.Count(t, dbURL, "SELECT count(*) FROM idempotency_tombstones") == 1 &&
					testkit.Count(t, dbURL, "SELECT count(*) FROM idempotency_records") == 0
			})
			checkExpired(api)
			checkExpired(purger)

			// Off: the contract's behaviour, the key is new again.
			off := apptest.Start(t, testkit.DatabaseURL(t, dialect), apptest.Env("IDEMPOTENCY_TTL=1s"))
			require.Equal(t, 201, create(off, apptest.OrderBody).Status)
			testkit.Eventually(t, 10*time.Second, "with tombstones off the key is new after the TTL", func() bool {
				a := create(off, apptest.OrderBody)
				return a.Status == 201 && a.Header.Get("Idempotent-Replayed") == ""
			})
		})
	}
}
