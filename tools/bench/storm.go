package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemkeys/payments/tools/harness"
)

// stormResult is what a retry storm on one key produced.
type stormResult struct {
	result
	// Bodies counts the distinct bodies among the 201 answers: 1 when
	// every duplicate got the original's answer.
	Bodies int
	// Statuses counts answers by status code.
	Statuses map[int]int
	// PoolWaits is how many times, during the storm, a request of the API
	// waited for a database connection because the pool was exhausted
	// (go_sql_wait_count_total before and after).
	PoolWaits int
}

// storm sends n copies of one create at once, each on a connection of its
// own, and measures each from the common start.
func storm(ctx context.Context, target *api, n int, key string) (stormResult, error) {
	waitsBefore, err := poolWaits(ctx, target.base)
	if err != nil {
		return stormResult{}, err
	}
	clients := make([]*api, n)
	for i := range clients {
		clients[i] = newAPI(target.base, 1)
	}
	// Open every connection first, so the storm measures the API and not
	// 1,000 TCP handshakes queueing in the kernel.
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { _ = warmConn(ctx, c) })
	}
	wg.Wait()

	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		bodies   = map[string]bool{}
		failures int
		firstErr error
		lat      = &harness.Latencies{}
		release  = make(chan struct{})
	)
	for _, c := range clients {
		wg.Go(func() {
			<-release
			start := time.Now()
			ans, err := c.createOrder(ctx, key)
			d := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			lat.Add(d)
			if err != nil {
				failures++
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			statuses[ans.status]++
			if ans.status == http.StatusCreated {
				bodies[ans.body] = true
			} else {
				failures++
			}
		})
	}
	start := time.Now()
	close(release)
	wg.Wait()
	elapsed := time.Since(start)
	waitsAfter, err := poolWaits(ctx, target.base)
	if err != nil {
		return stormResult{}, err
	}
	r := stormResult{
		result:    result{Name: "retry storm", Requests: n, Failed: failures, Elapsed: elapsed, Lat: lat},
		Bodies:    len(bodies),
		Statuses:  statuses,
		PoolWaits: waitsAfter - waitsBefore,
	}
	if firstErr != nil {
		r.Note = "first failure: " + firstErr.Error()
	}
	return r, nil
}

// warmConn opens c's one connection with a cheap request.
func warmConn(ctx context.Context, c *api) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// poolWaits reads go_sql_wait_count_total from the API's /metrics.
func poolWaits(ctx context.Context, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "go_sql_wait_count_total{") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			return int(v), err
		}
	}
	return 0, fmt.Errorf("%s/metrics has no go_sql_wait_count_total", base)
}
