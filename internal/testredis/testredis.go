// Package testredis starts a private redis-server for a test, on a free
// loopback port, so the test may kill, pause or flush it without touching
// anyone else's Redis. Under CI=true a missing redis-server fails the test;
// elsewhere the test is skipped with a line that says so.
package testredis

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkeys/payments/internal/testdb"
)

// Server is one private redis-server.
type Server struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

// Start runs a redis-server that lives as long as the test.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testdb.MissingService(t, "redis-server", err)
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &Server{t: t, port: port, dir: t.TempDir()}
	s.start()
	t.Cleanup(func() { s.Kill() })
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *Server) start() {
	s.t.Helper()
	s.cmd = exec.CommandContext(context.Background(), "redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.waitReady()
}

func (s *Server) waitReady() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer", s.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server at once (SIGKILL); Restart brings it back empty.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart starts the server again on the same port, with no data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// Pause freezes the server (SIGSTOP): connections stay open, nothing
// answers. Resume thaws it.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume thaws a paused server.
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

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
		testdb.MissingService(t, "redis-cli", err)
	}
	c := &Cluster{}
	args := []string{"--cluster", "create"}
	for range 3 {
		s := Start(t)
		// Restart the node in cluster mode on its port.
		s.Kill()
		s.cmd = exec.CommandContext(context.Background(), "redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
			"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("start cluster node: %v", err)
		}
		s.waitReady()
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
