// Package redisconn opens the Redis client of the API from REDIS_URL: one
// node, or a Redis Cluster, behind the same redis.UniversalClient.
//
//	redis://host:6379/0                               one node, database 0
//	redis://host1:7000?addr=host2:7001&addr=host3:7002 a cluster (seed nodes)
//
// Timeouts are tight on purpose: Redis only accelerates, so a slow Redis
// must cost a request milliseconds before it falls back to PostgreSQL, not
// seconds.
package redisconn

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options tune the client.
type Options struct {
	// Timeout bounds dialing and each command. Zero means 200ms.
	Timeout time.Duration
}

// Open returns a client for rawURL without connecting; the first command
// connects. It returns an error only for a malformed URL.
func Open(rawURL string, opts Options) (redis.UniversalClient, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 200 * time.Millisecond
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// A *url.Error repeats the whole URL, password included, and this
		// error is printed at start: keep only the reason.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	if u.Query().Has("addr") {
		copts, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL (cluster): %w", err)
		}
		if err := checkPool(copts.PoolSize, copts.MinIdleConns, copts.MaxIdleConns, copts.MaxActiveConns); err != nil {
			return nil, err
		}
		copts.DialTimeout, copts.ReadTimeout, copts.WriteTimeout = timeout, timeout, timeout
		copts.MaxRetries = 1
		return redis.NewClusterClient(copts), nil
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	if err := checkPool(o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns); err != nil {
		return nil, err
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = timeout, timeout, timeout
	o.MaxRetries = 1
	return redis.NewClient(o), nil
}

// checkPool refuses negative pool sizes in the URL's query, which go-redis
// accepts and then panics on when it makes the pool.
func checkPool(sizes ...int) error {
	for _, n := range sizes {
		if n < 0 {
			return errors.New("REDIS_URL: pool_size, min_idle_conns, max_idle_conns and max_active_conns must not be negative")
		}
	}
	return nil
}
