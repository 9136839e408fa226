package app_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/database"
	"github.com/idemkeys/payments/internal/testkit"
)

// BenchmarkReplay measures replays of stored answers through the whole
// program, from PostgreSQL alone and with the Redis replay cache in front:
//
//	go test -run '^$' -bench BenchmarkReplay -benchtime 5s ./internal/app
//
// Each sub-benchmark reports req/s; the ratio of the two is the figure that
// matters (absolute numbers depend on the machine).
func BenchmarkReplay(b *testing.B) {
	results := map[string]float64{}
	for _, withRedis := range []bool{false, true} {
		name := "postgres"
		if withRedis {
			name = "postgres+redis"
		}
		b.Run(name, func(b *testing.B) {
			dbURL := testkit.DatabaseURL(b, database.Postgres)
			env := []string{"DB_MAX_CONNS=20"}
			if withRedis {
				env = append(env, "REDIS_URL="+testkit.StartRedis(b).URL())
			}
			url := apptest.Start(b, dbURL, apptest.Env(env...)).URL
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

			const keys = 200
			for i := range keys {
				if status := post(b, client, url, fmt.Sprintf("replay-%d", i)); status != 201 {
					b.Fatalf("seed order %d: status %d", i, status)
				}
			}
			if withRedis {
				// Let the asynchronous cache fill settle.
				for i := range keys {
					post(b, client, url, fmt.Sprintf("replay-%d", i))
				}
			}
			var n atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1) % keys
					if status := post(b, client, url, fmt.Sprintf("replay-%d", i)); status != 201 {
						b.Errorf("replay: status %d", status)
						return
					}
				}
			})
			rps := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rps, "req/s")
			results[name] = rps
		})
	}
	if pg, rd := results["postgres"], results["postgres+redis"]; pg > 0 && rd > 0 {
		b.Logf("replay throughput: postgres %.0f req/s, postgres+redis %.0f req/s, ratio %.2fx", pg, rd, rd/pg)
	}
}

func post(b *testing.B, client *http.Client, url, key string) int {
	return apptest.Send(b, apptest.Request{Method: "POST", URL: url + "/v1/orders", APIKey: "sk_test_acme", Key: key, Body: apptest.OrderBody, Client: client}).Status
}
