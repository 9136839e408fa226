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
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	if u.Query().Has("addr") {
		copts, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL (cluster): %w", err)
		}
		copts.DialTimeout, copts.ReadTimeout, copts.WriteTimeout = timeout, timeout, timeout
		copts.MaxRetries = 1
		return redis.NewClusterClient(copts), nil
	}
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = timeout, timeout, timeout
	o.MaxRetries = 1
	return redis.NewClient(o), nil
}
