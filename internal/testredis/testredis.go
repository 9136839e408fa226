// Package testredis starts a private redis-server for a test, on a free
// loopback port, so the test may kill, pause or flush it without touching
// anyone else's Redis. Under CI=true a missing redis-server fails the test;
// elsewhere the test is skipped with a line that says so.
package testredis

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkeys/payments/internal/testkit"
	"github.com/idemkeys/payments/tools/harness"
)

// Server is one private redis-server (a harness.Redis tied to a test).
type Server struct {
	t testing.TB
	r *harness.Redis
}

// Start runs a redis-server that lives as long as the test.
func Start(t testing.TB) *Server {
	t.Helper()
	r, err := harness.StartRedis(t.TempDir(), nil)
	if errors.Is(err, harness.ErrMissing) {
		testkit.MissingService(t, "redis-server", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Kill)
	return &Server{t: t, r: r}
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return s.r.URL() }

// Addr is host:port.
func (s *Server) Addr() string { return s.r.Addr }

// Kill stops the server at once (SIGKILL, which also ends a paused one);
// Restart brings it back empty.
func (s *Server) Kill() { s.r.Kill() }

// Restart starts the server again on the same port, with no data.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.r.Restart(10 * time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// Pause freezes the server (SIGSTOP): connections stay open, nothing
// answers. Resume thaws it.
func (s *Server) Pause() { s.r.Send(syscall.SIGSTOP) }

// Resume thaws a paused server.
func (s *Server) Resume() { s.r.Send(syscall.SIGCONT) }

// Client returns a client of the server, closed with the test.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Cluster is a private Redis Cluster of three masters.
type Cluster struct {
	nodes []*Server
}

// StartCluster runs a three-node Redis Cluster (no replicas) that lives as
// long as the test, and waits until it serves every slot.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		testkit.MissingService(t, "redis-cli", err)
	}
	c := &Cluster{}
	args := []string{"--cluster", "create"}
	for range 3 {
		s := Start(t)
		// Start the node again in cluster mode, on its port.
		s.Kill()
		s.r.Args = append(s.r.Args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		s.Restart()
		c.nodes = append(c.nodes, s)
		args = append(args, s.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(context.Background(), "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every node must see the whole cluster before it serves every slot.
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.nodes {
		nc := redis.NewClient(&redis.Options{Addr: n.Addr()})
		for {
			info, err := nc.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				_ = nc.Close()
				t.Fatalf("cluster node %s not ready: %v %s", n.Addr(), err, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = nc.Close()
	}
	return c
}

// URL is the cluster's URL in the form redisconn.Open reads: the first
// node, and the others as addr parameters.
func (c *Cluster) URL() string {
	u := "redis://" + c.nodes[0].Addr() + "?"
	for i, n := range c.nodes[1:] {
		if i > 0 {
			u += "&"
		}
		u += "addr=" + n.Addr()
	}
	return u
}
