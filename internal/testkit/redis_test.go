package testkit

import (
	"io"
	"testing"
	"time"
)

// TestRedisKillAndRestart kills the private redis-server and starts it
// again on the same port.
func TestRedisKillAndRestart(t *testing.T) {
	r, err := RunRedis(t.TempDir(), io.Discard)
	if err != nil {
		MissingService(t, "redis-server", err)
	}
	t.Cleanup(r.Kill)
	r.Kill()
	if r.Running() || r.ping() {
		t.Fatal("redis answers after Kill")
	}
	if err := r.Restart(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if r.Starts() != 2 {
		t.Fatalf("starts = %d, want 2", r.Starts())
	}
}
