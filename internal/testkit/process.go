package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Module is the import path prefix of the project's commands.
const Module = "github.com/idemkeys/payments/"

// Build compiles the commands (e.g. "cmd/api") into dir and returns the
// binaries' paths, in order.
func Build(ctx context.Context, dir string, commands ...string) ([]string, error) {
	paths := make([]string, len(commands))
	for i, c := range commands {
		paths[i] = filepath.Join(dir, filepath.Base(c))
		cmd := exec.CommandContext(ctx, "go", "build", "-o", paths[i], Module+c)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("build %s: %w", c, err)
		}
	}
	return paths, nil
}

// BuildModule compiles the main package of a module of its own (e.g.
// "tools/fiberpeer", whose go.mod keeps its dependencies out of the
// project's), given relative to the repository's root, into dir, and
// returns the binary's path. go build runs in the module's directory.
func BuildModule(ctx context.Context, dir, rel string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(rel))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, filepath.FromSlash(rel))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", rel, err)
	}
	return bin, nil
}

// FindFreeAddr returns a loopback host:port that was free a moment ago.
func FindFreeAddr() (string, error) {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}

// Process is one program that can be started, killed and started again with
// the same command line, address and environment.
type Process struct {
	// Name labels the process in errors and in its log file's name.
	Name string
	// Path and Args are the command line.
	Path string
	Args []string
	// Env is added to this process's environment.
	Env []string
	// Addr is host:port the process serves on, if any.
	Addr string
	// Ready reports whether a started process serves; Start waits for it.
	// Nil means HTTPReady on http://Addr/healthz.
	Ready func() bool
	// Log receives the process's output (stdout and stderr); nil discards it.
	Log io.Writer
	// Credential, when set, runs the process as another user (PostgreSQL
	// refuses to run as root).
	Credential *syscall.Credential

	mu     sync.Mutex
	cmd    *exec.Cmd // the running process; nil once it exited
	last   *exec.Cmd // the process last started, running or not
	exited chan struct{}
	starts int
}

// Start runs the process and waits up to timeout for Ready.
func (p *Process) Start(timeout time.Duration) error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s: already running", p.Name)
	}
	cmd := exec.CommandContext(context.Background(), p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	out := p.Log
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	// A process group of its own, so a Ctrl-C on the harness does not
	// reach it before the harness has decided what to do.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.Credential}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.last, p.exited = cmd, cmd, exited
	p.starts++
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		// Forget the process before telling anyone it exited, so that a
		// Kill followed at once by Start finds nothing running.
		p.mu.Lock()
		if p.cmd == cmd {
			p.cmd = nil
		}
		p.mu.Unlock()
		close(exited)
	}()

	ready := p.Ready
	if ready == nil {
		ready = func() bool { return HTTPReady("http://" + p.Addr + "/healthz") }
	}
	deadline := time.Now().Add(timeout)
	for !ready() {
		select {
		case <-exited:
			return fmt.Errorf("%s exited while starting (exit %d)", p.Name, cmd.ProcessState.ExitCode())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become ready within %s", p.Name, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Running reports whether the process is running.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// Pid is the running process's id, 0 when it is not running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Starts is how many times the process was started.
func (p *Process) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Kill sends SIGKILL and waits for the process to be gone. A process that is
// not running is left alone.
func (p *Process) Kill() { p.Signal(syscall.SIGKILL, 0) }

// Stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it.
func (p *Process) Stop(grace time.Duration) { p.Signal(syscall.SIGTERM, grace) }

// Signal sends sig and waits up to grace for the process to exit, then
// kills it; a grace of zero waits as long as it takes.
func (p *Process) Signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if grace <= 0 {
		<-exited
		return
	}
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Send sends sig to the running process and returns at once: SIGSTOP and
// SIGCONT freeze and thaw it. A process that is not running is left alone.
func (p *Process) Send(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// Wait waits until the process last started has exited and returns its
// exit code: -1 when it was never started or a signal ended it.
func (p *Process) Wait() int {
	p.mu.Lock()
	cmd, exited := p.last, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return -1
	}
	<-exited
	return cmd.ProcessState.ExitCode()
}

// Restart kills the process and starts it again.
func (p *Process) Restart(timeout time.Duration) error {
	p.Kill()
	return p.Start(timeout)
}

// HTTPReady reports whether url answers 200 within a second.
func HTTPReady(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Group stops a set of processes together.
type Group struct {
	mu    sync.Mutex
	procs []*Process
}

// Add registers p and returns it.
func (g *Group) Add(p *Process) *Process {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.procs = append(g.procs, p)
	return p
}

// KillAll kills every registered process, the last added first.
func (g *Group) KillAll() {
	g.mu.Lock()
	procs := append([]*Process(nil), g.procs...)
	g.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Kill()
	}
}

// ErrMissing says a program the harness needs is not installed.
var ErrMissing = errors.New("not installed")

// LookPath finds a program on PATH or in the given folders (globs allowed).
func LookPath(name string, folders ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, f := range folders {
		matches, _ := filepath.Glob(filepath.Join(f, name))
		if len(matches) > 0 {
			return matches[len(matches)-1], nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, ErrMissing)
}

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := FindFreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Binaries compiles the commands (e.g. "cmd/api", "cmd/provider") into the
// test's temporary folder and returns their paths, in order. Only tests of
// the end-to-end tier (EndToEnd) build binaries.
func Binaries(t testing.TB, commands ...string) []string {
	t.Helper()
	requireEndToEnd(t, "building binaries")
	paths, err := Build(context.Background(), t.TempDir(), commands...)
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// StartProcess runs bin with HTTP_ADDR=addr, LOG_LEVEL=warn and env added to
// this process's environment, waits for GET /healthz to answer 200, and
// kills it when the test ends. Its output is logged if the test failed; the
// Process's Log is a *SyncBuffer holding it. Only tests of the end-to-end
// tier (EndToEnd) start processes.
func StartProcess(t testing.TB, bin, addr string, env ...string) *Process {
	t.Helper()
	requireEndToEnd(t, "starting "+filepath.Base(bin))
	out := &SyncBuffer{}
	p := &Process{
		Name: filepath.Base(bin),
		Path: bin,
		Env:  append([]string{"HTTP_ADDR=" + addr, "LOG_LEVEL=warn"}, env...),
		Addr: addr,
		Log:  out,
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", p.Name, out.String())
		}
	})
	if err := p.Start(60 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return p
}

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
