package testkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSServerFolder is where Debian's nats-server package installs the
// server, which a non-root PATH often lacks.
const NATSServerFolder = "/usr/sbin"

// NATS is a private nats-server with JetStream on a free loopback port,
// keeping its streams in a folder of its own: killed and started again, it
// comes back with what it had stored.
type NATS struct {
	*Process
}

// RunNATS starts nats-server -js storing in dir, its output going to log
// (nil discards it). The caller kills it.
func RunNATS(dir string, log io.Writer) (*NATS, error) {
	bin, err := LookPath("nats-server", NATSServerFolder)
	if err != nil {
		return nil, err
	}
	addr, err := FindFreeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	n := &NATS{Process: &Process{
		Name: "nats-server",
		Path: bin,
		Args: []string{"-a", host, "-p", port, "-js", "-sd", dir},
		Addr: addr,
		Log:  log,
	}}
	n.Ready = func() bool { return n.ping() == nil }
	if err := n.Start(30 * time.Second); err != nil {
		return nil, err
	}
	return n, nil
}

// StartNATS runs a nats-server with JetStream that lives as long as the
// test. Under CI=true a missing nats-server fails the test; elsewhere the
// test is skipped with a line that says so.
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	out := &SyncBuffer{}
	n, err := RunNATS(t.TempDir(), out)
	if errors.Is(err, ErrMissing) {
		MissingService(t, "nats-server", fmt.Errorf("%w (Debian: apt-get install nats-server)", err))
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Cleanup(func() {
		n.Kill()
		if t.Failed() {
			t.Logf("nats-server output:\n%s", out.String())
		}
	})
	return n
}

// URL is the server's nats:// URL.
func (n *NATS) URL() string { return "nats://" + n.Addr }

// Conn returns a connection to the server, closed when the test ends. It
// reconnects after a Restart like any client would.
func (n *NATS) Conn(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(n.URL(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("connect to nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context over a new Conn.
func (n *NATS) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(n.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// ping connects and asks for the JetStream account, which answers only once
// JetStream is up.
func (n *NATS) ping() error {
	nc, err := nats.Connect(n.URL(), nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	return nil
}
