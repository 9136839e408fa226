package testkit

import (
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a private redis-server on a free loopback port that keeps
// nothing on disk, so that its user may kill, pause or flush it without
// touching anyone else's Redis.
type Redis struct {
	*Process
}

// RunRedis starts a redis-server in dir, its output going to log (nil
// discards it). The caller kills it.
func RunRedis(dir string, log io.Writer) (*Redis, error) {
	bin, err := LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	addr, err := FindFreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	r := &Redis{Process: &Process{
		Name: "redis",
		Path: bin,
		Args: []string{"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
			"--dir", dir, "--loglevel", "warning"},
		Addr: addr,
		Log:  log,
	}}
	r.Ready = r.ping
	if err := r.Start(30 * time.Second); err != nil {
		return nil, err
	}
	return r, nil
}

// StartRedis runs a redis-server that lives as long as the test. Under
// CI=true a missing redis-server fails the test; elsewhere the test is
// skipped with a line that says so.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	r, err := RunRedis(t.TempDir(), nil)
	if errors.Is(err, ErrMissing) {
		MissingService(t, "redis-server", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Kill)
	return r
}

// URL is the server's redis:// URL.
func (r *Redis) URL() string { return "redis://" + r.Addr + "/0" }

// Pause freezes the server (SIGSTOP): connections stay open, nothing
// answers. Resume thaws it; Kill (SIGKILL) also ends a paused server.
func (r *Redis) Pause() { r.Send(syscall.SIGSTOP) }

// Resume thaws a paused server.
func (r *Redis) Resume() { r.Send(syscall.SIGCONT) }

// Client returns a client of the server, closed when the test ends.
func (r *Redis) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (r *Redis) ping() bool {
	c := redis.NewClient(&redis.Options{Addr: r.Addr, DialTimeout: 500 * time.Millisecond})
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Ping(ctx).Err() == nil
}

// RedisCluster is a private Redis Cluster of three masters.
type RedisCluster struct {
	nodes []*Redis
}

// StartRedisCluster runs a three-node Redis Cluster (no replicas) that
// lives as long as the test, and waits until it serves every slot. Only
// tests of the end-to-end tier (EndToEnd) start one.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	requireEndToEnd(t, "starting a Redis Cluster")
	if _, err := exec.LookPath("redis-cli"); err != nil {
		MissingService(t, "redis-cli", err)
	}
	c := &RedisCluster{}
	args := []string{"--cluster", "create"}
	for range 3 {
		r := StartRedis(t)
		// Start the node again in cluster mode, on its port.
		r.Kill()
		r.Args = append(r.Args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		if err := r.Start(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, r)
		args = append(args, r.Addr)
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(context.Background(), "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every node must see the whole cluster before it serves every slot.
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.nodes {
		nc := redis.NewClient(&redis.Options{Addr: n.Addr})
		for {
			info, err := nc.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				_ = nc.Close()
				t.Fatalf("cluster node %s not ready: %v %s", n.Addr, err, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = nc.Close()
	}
	return c
}

// URL is the cluster's URL in the form redisconn.Open reads: the first
// node, and the others as addr parameters.
func (c *RedisCluster) URL() string {
	u := "redis://" + c.nodes[0].Addr + "?"
	for i, n := range c.nodes[1:] {
		if i > 0 {
			u += "&"
		}
		u += "addr=" + n.Addr
	}
	return u
}
