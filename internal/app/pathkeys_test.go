package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestKeysInUnrelatedPathsAreNeverWrittenRaw: a client that puts its
// idempotency key (or anything of its own) in a path other than the
// introspection route, /v1/orders/<key> and the like, finds it in none of
// 10,000 access log lines nor in any exported span: the segment is there as
// its keyed hash, while the route's words and real ids stay readable.
func TestKeysInUnrelatedPathsAreNeverWrittenRaw(t *testing.T) {
	testkit.EndToEnd(t)
	bin, _ := apptest.Binaries(t)
	receiver := testkit.StartOTLPReceiver(t)
	api := apptest.StartBinary(t, bin, testkit.DatabaseURL(t, database.SQLite),
		apptest.Env("LOG_LEVEL=info", "OTEL_EXPORTER_OTLP_ENDPOINT="+receiver.URL))
	const key = "checkout-7f3a9-Secret"
	orderID := api.CreateOrder(t, "sk_test_acme")
	paths := []string{
		"/v1/orders/" + key,
		"/v1/payments/" + key + "/refunds",
		"/v1/orders/" + orderID + "/" + key,
		"/nothing/" + key,
		"/v1/" + key,
	}
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	const requests = 10_000
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				req, err := http.NewRequest("GET", api.URL+paths[i%len(paths)], nil)
				if err != nil {
					continue
				}
				req.Header.Set("Authorization", "Bearer sk_test_acme")
				if resp, err := client.Do(req); err == nil {
					_ = resp.Body.Close()
				}
			}
		})
	}
	for i := range requests {
		next <- i
	}
	close(next)
	wg.Wait()

	var logs string
	testkit.Eventually(t, 10*time.Second, "10,000 access log lines", func() bool {
		logs = api.Logs()
		return strings.Count(logs, `"msg":"request"`) >= requests
	})
	require.NotContains(t, logs, key, "a key in a path was logged raw")
	require.NotContains(t, logs, strings.ToLower(key))
	require.Contains(t, logs, `"path":"/v1/orders/~`, "the segment is logged as its hash")
	require.Contains(t, logs, fmt.Sprintf(`"path":"/v1/orders/%s/~`, orderID), "an id of the API's shape stays readable")

	testkit.Eventually(t, 20*time.Second, "spans of the requests", func() bool {
		return len(receiver.Spans()) > 100
	})
	for _, s := range receiver.Spans() {
		require.NotContains(t, s.Name, key)
		for k, v := range s.Attributes {
			require.NotContains(t, v, key, "span %q attribute %s", s.Name, k)
		}
	}
}
