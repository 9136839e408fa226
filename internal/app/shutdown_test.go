package app_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkeys/payments/internal/app/apptest"
	"github.com/idemkeys/payments/internal/testkit"
)

// TestGracefulShutdownFinishesInFlightRequest sends SIGTERM to the API
// process while a request is half received: the listener closes at once,
// the request still completes with 201, the process exits 0, and the order
// and its idempotency record are in the database for a replay after a
// restart.
func TestGracefulShutdownFinishesInFlightRequest(t *testing.T) {
	testkit.EndToEnd(t)
	apiBin, _ := apptest.Binaries(t)
	dbURL := "sqlite:" + filepath.Join(t.TempDir(), "api.db")
	started := apptest.StartBinary(t, apiBin, dbURL, apptest.Env("SHUTDOWN_TIMEOUT=20s"))
	api, addr := started.Process, started.Addr

	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	r := bufio.NewReader(conn)

	// Expect: 100-continue makes the server say when the handler starts
	// reading the body: from then on the request is surely in flight.
	key := apptest.NewKey()
	_, err = fmt.Fprintf(conn, "POST /v1/orders HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer sk_test_acme\r\n"+
		"Idempotency-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		addr, key, len(apptest.OrderBody))
	require.NoError(t, err)
	cont, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusContinue, cont.StatusCode)
	half := len(apptest.OrderBody) / 2
	_, err = io.WriteString(conn, apptest.OrderBody[:half])
	require.NoError(t, err)

	require.True(t, api.Running())
	api.Send(syscall.SIGTERM)
	testkit.Eventually(t, 5*time.Second, "new connections are refused", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return false
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	})

	_, err = io.WriteString(conn, apptest.OrderBody[half:])
	require.NoError(t, err)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	require.True(t, resp.Close, "the server closes the connection it finished during shutdown")

	exited := make(chan int, 1)
	go func() { exited <- api.Wait() }()
	select {
	case code := <-exited:
		require.Equal(t, 0, code, "a graceful stop exits 0")
	case <-time.After(15 * time.Second):
		t.Fatal("api did not exit after SIGTERM")
	}

	require.EqualValues(t, 1, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"))
	require.EqualValues(t, 1, testkit.Count(t, dbURL, "SELECT count(*) FROM idempotency_records WHERE idempotency_key = ? AND state = 'completed'", key))

	again := apptest.StartBinary(t, apiBin, dbURL, apptest.Env("SHUTDOWN_TIMEOUT=20s"))
	replay := apptest.Call(t, "POST", again.URL+"/v1/orders", "sk_test_acme", key, apptest.OrderBody)
	require.Equal(t, http.StatusCreated, replay.Status, string(replay.Body))
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Equal(t, body, replay.Body)
	require.EqualValues(t, 1, testkit.Count(t, dbURL, "SELECT count(*) FROM orders"))
}
