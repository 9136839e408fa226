// Package testproc runs the project's own binaries as real processes in
// tests: build them, start them on a free loopback port, wait until they are
// healthy, and kill them when the test ends. Tests that kill, restart or
// signal a process (SIGKILL mid-payment, SIGTERM with a request in flight)
// and tests of the client against the real servers share it.
package testproc

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemkeys/payments/tools/harness"
)

// Module is the import path prefix of the project's commands.
const Module = harness.Module

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Build compiles the commands (e.g. "cmd/api", "cmd/provider") into the
// test's temporary folder and returns their paths, in order.
func Build(t testing.TB, commands ...string) []string {
	t.Helper()
	paths, err := harness.Build(context.Background(), t.TempDir(), "", commands...)
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// Process is a started binary.
type Process struct {
	Cmd    *exec.Cmd
	Output *SyncBuffer
	exited chan struct{}
}

// Start runs bin with HTTP_ADDR=addr, LOG_LEVEL=warn and env added to this
// process's environment, waits for GET /healthz to answer 200, and kills it
// when the test ends (its output is logged if the test failed).
func Start(t testing.TB, bin, addr string, env ...string) *Process {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), bin)
	cmd.Env = append(os.Environ(), append([]string{"HTTP_ADDR=" + addr, "LOG_LEVEL=warn"}, env...)...)
	out := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &Process{Cmd: cmd, Output: out, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !Healthy("http://" + addr + "/healthz") {
		select {
		case <-p.exited:
			t.Fatalf("%s exited at start:\n%s", bin, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become healthy", bin)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// Wait waits for the process to exit and returns its exit code.
func (p *Process) Wait() int {
	<-p.exited
	return p.Cmd.ProcessState.ExitCode()
}

// Healthy reports whether url answers 200 within a second.
func Healthy(url string) bool { return harness.HTTPReady(url) }

// SyncBuffer collects output written from several goroutines.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
